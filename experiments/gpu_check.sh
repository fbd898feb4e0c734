#!/usr/bin/env bash
# The GPU check of issue 15 (see experiments/gpu_check.py): set up, then tune one convolution
# with the cost model and BO's GP on the GPU and on the CPU, side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
make env >/dev/null
.venv/bin/python -m experiments.gpu_check "$@"
