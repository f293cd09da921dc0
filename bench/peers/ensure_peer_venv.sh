#!/usr/bin/env bash
# Create (once) the virtual environment that holds the Python peers that are
# not packaged by Debian: tensorflow-cpu (tf.data peer, TF interop tests) and
# pytest. Idempotent: a venv that already imports everything is left alone.
#
# Prints the venv's python path as the only line on stdout; everything else
# (pip progress, messages) goes to stderr.
#
#   PY=$(bench/peers/ensure_peer_venv.sh) && "$PY" bench/peers/w2_tfdata.py --data DIR
#
# Environment:
#   SLUICE_PEER_VENV   venv location (default: $HOME/.cache/sluice/peer-venv)
#   PYTHON             interpreter used to create the venv (default: python3)
set -euo pipefail

TF_VERSION="2.21.0"
VENV="${SLUICE_PEER_VENV:-$HOME/.cache/sluice/peer-venv}"
PYTHON="${PYTHON:-python3}"
VPY="$VENV/bin/python"

log() { echo "ensure_peer_venv: $*" >&2; }
die() { log "ERROR: $*"; exit 1; }

check() {
    "$VPY" - "$TF_VERSION" <<'EOF' >/dev/null 2>&1
import os, sys
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf
import pytest  # noqa: F401
sys.exit(0 if tf.__version__ == sys.argv[1] else 1)
EOF
}

if [[ -x "$VPY" ]] && check; then
    echo "$VPY"
    exit 0
fi

if [[ ! -x "$VPY" ]]; then
    command -v "$PYTHON" >/dev/null 2>&1 || die "'$PYTHON' not found on PATH"
    log "creating venv at $VENV with $("$PYTHON" --version 2>&1)"
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV" >&2 || die "'$PYTHON -m venv $VENV' failed (is the venv module installed?)"
fi

log "installing tensorflow-cpu==$TF_VERSION and pytest into $VENV (this takes a while)"
"$VPY" -m pip install --upgrade pip >&2 \
    || die "pip upgrade failed in $VENV"
"$VPY" -m pip install "tensorflow-cpu==$TF_VERSION" pytest >&2 \
    || die "pip install tensorflow-cpu==$TF_VERSION pytest failed; remove $VENV and retry"

if ! check; then
    log "import check output:"
    TF_CPP_MIN_LOG_LEVEL=2 "$VPY" -c "import tensorflow as tf, pytest; print(tf.__version__)" >&2 || true
    die "tensorflow-cpu==$TF_VERSION does not import in $VENV"
fi

log "ok: $("$VPY" -c 'import os; os.environ["TF_CPP_MIN_LOG_LEVEL"]="2"; import tensorflow as tf; print("tensorflow", tf.__version__)' 2>/dev/null)"
echo "$VPY"
