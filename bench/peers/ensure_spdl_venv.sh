#!/usr/bin/env bash
# Create (once) the virtual environment of the SPDL peer (Meta's
# thread-based data loading, `spdl` from PyPI). SPDL decodes with FFmpeg's
# shared libraries, which it finds on the system: Debian 12's FFmpeg 5.1
# (libavfilter8 and libavdevice59 beside the libavcodec59 other packages
# bring) is installed with apt on first use. Prints the venv's python as the
# only line on stdout; messages go to stderr.
#
# Environment: SLUICE_SPDL_VENV (default $HOME/.cache/sluice/spdl-venv),
# PYTHON (interpreter to create it with, default python3).
set -euo pipefail

SPDL="spdl==0.8.0"
VENV="${SLUICE_SPDL_VENV:-$HOME/.cache/sluice/spdl-venv}"
PYTHON="${PYTHON:-python3}"
VPY="$VENV/bin/python"
FFMPEG=(libavcodec59 libavformat59 libavfilter8 libavdevice59 libavutil57 libswscale6 libswresample4)

log() { echo "ensure_spdl_venv: $*" >&2; }

if [[ -x "$VPY" ]] && "$VPY" -c "import spdl.io" >/dev/null 2>&1; then
  echo "$VPY"
  exit 0
fi
missing=()
for p in "${FFMPEG[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  log "installing FFmpeg's libraries for SPDL (apt): ${missing[*]}"
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2 ||
    { log "ERROR: apt-get install ${missing[*]} failed"; exit 1; }
fi
[[ -x "$VPY" ]] || "$PYTHON" -m venv "$VENV" >&2
log "installing $SPDL into $VENV"
"$VPY" -m pip install -q "$SPDL" numpy >&2 || { log "ERROR: pip install $SPDL failed"; exit 1; }
"$VPY" -c "import spdl.io" >&2 || { log "ERROR: spdl.io does not import"; exit 1; }
echo "$VPY"
