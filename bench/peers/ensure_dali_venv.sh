#!/usr/bin/env bash
# Create (once) the virtual environment of the DALI peer (nvidia-dali from
# PyPI, whose CPU pipeline runs without a GPU). Prints the venv's python as
# the only line on stdout; messages go to stderr.
#
# Environment: SLUICE_DALI_VENV (default $HOME/.cache/sluice/dali-venv),
# PYTHON (interpreter to create it with, default python3).
set -euo pipefail

DALI="nvidia-dali-cuda120==2.4.0"
VENV="${SLUICE_DALI_VENV:-$HOME/.cache/sluice/dali-venv}"
PYTHON="${PYTHON:-python3}"
VPY="$VENV/bin/python"

log() { echo "ensure_dali_venv: $*" >&2; }

if [[ -x "$VPY" ]] && "$VPY" -c "import nvidia.dali" >/dev/null 2>&1; then
  echo "$VPY"
  exit 0
fi
[[ -x "$VPY" ]] || "$PYTHON" -m venv "$VENV" >&2
log "installing $DALI into $VENV (about 0.5 GB)"
"$VPY" -m pip install -q "$DALI" numpy >&2 || { log "ERROR: pip install $DALI failed"; exit 1; }
"$VPY" -c "import nvidia.dali" >&2 || { log "ERROR: nvidia.dali does not import"; exit 1; }
echo "$VPY"
