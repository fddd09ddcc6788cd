#!/usr/bin/env bash
# candle-kernels from crates.io built three ways in one run (BENCHMARKS.md
# item 8): candle's own build.rs (cudaforge, CUDA_COMPUTE_CAP=80), occ-build
# embedding PTX for sm_80, occ-build's default fatbin for sm_80+sm_90; then
# the kernels.rs figures of issue 14 item 3 at candle's size and at 2000
# kernels x 3 archs. Needs the network once (cargo fetch), python3, the nvcc
# of .cuda/ (scripts/cuda-toolkit) or NVCC=. Not part of CI or the tests.
#
#   bench/candle.sh
#
# Environment: BENCH_DIR (scratch crates and their target dir, default
# /tmp/occ-bench/candle), REPS (timed repetitions, interleaved across the
# crates, default 1), CANDLE_CORE=1 (build candle-core against each crate
# through [patch.crates-io]), RELEASE=0 (no release binaries), MOE (1: build
# libmoe.a with occ-build's Build::static_lib, 0: not; default: when the
# occ-build tree has it), OCC_ROOT (the occ tree the copies depend on,
# default this one), SMOKE=1 (a quick check of the script, no figures).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "# uptime: $(uptime)"
echo "# $(date -u '+%F %T UTC'), $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 bench/candle.py
echo "# done $(date -u '+%T UTC'), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# uptime: $(uptime)"
