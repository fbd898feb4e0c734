#!/usr/bin/env bash
# The GPU check of issue 15 (see scripts/gpu_check.py): set up, then tune a tiny network
# with the cost model and BO's GP on the GPU and on the CPU, printing seconds per round.
set -euo pipefail
cd "$(dirname "$0")/.."
make env >/dev/null
.venv/bin/python scripts/gpu_check.py "$@"
