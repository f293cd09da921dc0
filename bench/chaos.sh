#!/usr/bin/env bash
# The service's chaos soak (see bench/chaos.py): ROUNDS rounds of random
# worker, consumer and dispatcher kills, counting sample ids.
# Usage: bench/chaos.sh [ROUNDS]   (default 50; needs scripts/python_env.sh's .venv)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
exec .venv/bin/python bench/chaos.py --rounds "${1:-50}" "${@:2}"
