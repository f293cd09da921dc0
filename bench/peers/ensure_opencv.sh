#!/usr/bin/env bash
# Make sure Debian's python3 can import cv2 (the expert peers: w1_expert.py
# --variant cv2, w2_opencv.py), installing python3-opencv with apt on first
# use. Prints the interpreter (/usr/bin/python3) as the only line on stdout;
# messages go to stderr.
set -euo pipefail

PY=/usr/bin/python3
log() { echo "ensure_opencv: $*" >&2; }

if "$PY" -c "import cv2" >/dev/null 2>&1; then
  echo "$PY"
  exit 0
fi
SUDO=""
[[ $(id -u) -ne 0 ]] && SUDO="sudo"
log "installing python3-opencv (apt)"
$SUDO apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-opencv >&2 ||
  { log "ERROR: apt-get install python3-opencv failed"; exit 1; }
"$PY" -c "import cv2" >&2 || { log "ERROR: cv2 does not import"; exit 1; }
echo "$PY"
