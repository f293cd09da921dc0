#!/usr/bin/env bash
# Create (once) the virtual environment of the streaming-dataset peers:
# LitData and MosaicML Streaming from PyPI, with PyPI's CPU build of torch
# (pinned: a bare `torch` pulls the CUDA wheels) and OpenCV for the expert's
# decoding. MosaicML Streaming pulls PyPI's torchvision, which is built for
# the CUDA torch and fails to import beside the CPU one: it is removed, and
# the peer leaves out the `streaming.vision` datasets that import it
# (bench/peers/w3_streaming.py). Prints the venv's python as the only line on stdout; messages go
# to stderr.
#
# Environment: SLUICE_STREAM_VENV (default $HOME/.cache/sluice/stream-venv),
# PYTHON (interpreter to create it with, default python3).
set -euo pipefail

PACKAGES=(torch==2.13.0 litdata==0.2.76 mosaicml-streaming==0.13.0 opencv-python-headless)
VENV="${SLUICE_STREAM_VENV:-$HOME/.cache/sluice/stream-venv}"
PYTHON="${PYTHON:-python3}"
VPY="$VENV/bin/python"
CHECK="import sys, types; sys.modules['streaming.vision'] = types.ModuleType('streaming.vision')
import litdata, streaming, cv2, torch"

log() { echo "ensure_stream_venv: $*" >&2; }

if [[ -x "$VPY" ]] && "$VPY" -c "$CHECK" >/dev/null 2>&1; then
  echo "$VPY"
  exit 0
fi
[[ -x "$VPY" ]] || "$PYTHON" -m venv "$VENV" >&2
log "installing ${PACKAGES[*]} into $VENV"
"$VPY" -m pip install -q "${PACKAGES[@]}" >&2 || { log "ERROR: pip install ${PACKAGES[*]} failed"; exit 1; }
"$VPY" -m pip uninstall -q -y torchvision >&2
"$VPY" -c "$CHECK" >&2 || { log "ERROR: the streaming peers' libraries do not import"; exit 1; }
echo "$VPY"
