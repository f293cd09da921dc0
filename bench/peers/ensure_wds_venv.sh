#!/usr/bin/env bash
# Create (once) the virtual environment of the webdataset peer: the
# `webdataset` library from PyPI over Debian's python3 with its torch,
# torchvision and PIL (--system-site-packages). Prints the venv's python as
# the only line on stdout; messages go to stderr.
#
# Environment: SLUICE_WDS_VENV (default $HOME/.cache/sluice/wds-venv).
set -euo pipefail

VENV="${SLUICE_WDS_VENV:-$HOME/.cache/sluice/wds-venv}"
VPY="$VENV/bin/python"
log() { echo "ensure_wds_venv: $*" >&2; }

if [[ -x "$VPY" ]] && "$VPY" -c "import webdataset, torchvision" >/dev/null 2>&1; then
  echo "$VPY"
  exit 0
fi
[[ -x "$VPY" ]] || /usr/bin/python3 -m venv --system-site-packages "$VENV" >&2
log "installing webdataset into $VENV"
"$VPY" -m pip install -q webdataset >&2 || { log "ERROR: pip install webdataset failed"; exit 1; }
"$VPY" -c "import webdataset, torchvision" >&2 || { log "ERROR: webdataset does not import"; exit 1; }
echo "$VPY"
