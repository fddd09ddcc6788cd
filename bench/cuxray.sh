#!/usr/bin/env bash
# occ beside cuxray (issue 16 item 4; BENCHMARKS.md section 9). Not part of
# the tests or CI.
#
#   bench/cuxray.sh
#
# 1. Installs cuxray 0.6.0 from PyPI into a scratch venv (python3 -m venv).
# 2. Builds two scratch crates with this checkout's occ-build: example-app's
#    kernels with example-app's build (kernels/*.cu for sm_80, sm_86,
#    sm_90), and the CUB corpus of tests/corpus for the archs the corpus
#    test builds (sm_75, sm_80, sm_86, sm_90, sm_120); and, as neither
#    spills much, the spilling kernels of the tests (sm_75, sm_80, sm_90,
#    sm_120); with the nvcc of .cuda/ (scripts/cuda-toolkit) or NVCC=.
# 3. Runs cuxray offline (CUXRAY_NO_FETCH=1; CUXRAY_TOOLCHAIN= a folder of
#    links to the same toolkit's nvdisasm, cuobjdump and ptxas) on every
#    cubin the builds left, at the launch occ judges each kernel at (its
#    declared launch, else its best block size).
# 4. Prints one row per kernel x arch, occ beside cuxray: registers, spilled
#    bytes, occupancy, the line that spills most, the peak register pressure
#    and its line; then every disagreement, each with its explanation.
#
# Environment: BENCH_DIR (scratch venv, crates and target dir, default
# /tmp/occ-bench/cuxray), CUXRAY_VERSION (default 0.6.0), SMOKE=1 (the
# example-app kernels only). Needs the network once (pip, cargo fetch).
set -euo pipefail
cd "$(dirname "$0")/.."
echo "# $(date -u '+%F %T UTC'), $(nproc) CPUs, load: $(cut -d' ' -f1-3 /proc/loadavg)"
exec python3 bench/cuxray.py "$@"
