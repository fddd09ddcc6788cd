#!/usr/bin/env bash
# The whole benchmark suite in one command (see BENCHMARKS.md):
#   bench/run.sh            # everything: whole builds, then the criterion benches
#   bench/run.sh builds     # only the whole-build figures (items 1, 2, 5, 6)
#   bench/run.sh criterion  # only the criterion benches (items 3, 4, 15)
# Environment: REPS (timed repetitions per figure, default 3), BENCH_DIR
# (scratch crates and their own target dir, default /tmp/occ-bench), NVCC.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
echo "# $(date -u '+%F %T UTC'), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ "$what" == all || "$what" == builds ]]; then
    python3 bench/builds.py
fi
if [[ "$what" == all || "$what" == criterion ]]; then
    cargo bench -p occ-model --bench sweep --bench ptxas --bench report
    python3 bench/criterion_table.py
fi
echo "# done $(date -u '+%T UTC'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
