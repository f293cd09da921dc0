#!/usr/bin/env bash
# Makes sure .venv holds pyarrow, whose wheel ships Apache Arrow's C++
# libraries and headers: the build links the Parquet and Arrow IPC sources
# against them (Debian 12 packages no Arrow C++). Without network or PyPI
# the build goes on without those sources (they then report it).
set -euo pipefail
cd "$(dirname "$0")/.."

PYARROW="pyarrow==26.0.1"
[[ -x .venv/bin/python ]] || python3 -m venv .venv
if .venv/bin/python -c "import pyarrow" >/dev/null 2>&1; then
  exit 0
fi
echo "ensure_pyarrow: installing $PYARROW into .venv (Arrow's C++ libraries for the Parquet source)"
.venv/bin/python -m pip install -q "$PYARROW" ||
  echo "ensure_pyarrow: WARNING: $PYARROW could not be installed; building without Parquet and Arrow IPC sources" >&2
