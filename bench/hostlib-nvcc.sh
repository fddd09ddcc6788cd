#!/bin/sh
# The nvcc work of a host-code library (Build::static_lib) against a plain
# `nvcc -c` of the same files and archs: occ's one run per file
# (`-c -keep -Xptxas -v`, every -gencode) vs the same command without
# -keep and -Xptxas -v. Alternates the two, ROUNDS times, and prints the
# median wall time of each over the files and their ratio.
# Usage: bench/hostlib-nvcc.sh [ROUNDS]   (NVCC= to pick the nvcc)
set -eu
cd "$(dirname "$0")/.."
NVCC=${NVCC:-.cuda/cu13/nvidia/cu13/bin/nvcc}
ROUNDS=${1:-7}
SRC=tests/fixtures/cu/hostlib
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
GENCODE="-gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=[sm_90,compute_90]"
now() { date +%s.%N; }
plain=""; occ=""
i=0
while [ $i -lt "$ROUNDS" ]; do
  t0=$(now)
  for f in moe topk; do
    $NVCC -c $GENCODE -o "$TMP/$f.o" -I$SRC $SRC/$f.cu
  done
  t1=$(now)
  for f in moe topk; do
    rm -rf "$TMP/keep"; mkdir "$TMP/keep"
    $NVCC -c $GENCODE -Xptxas -v -keep --keep-dir "$TMP/keep" -o "$TMP/$f.o" -I$SRC $SRC/$f.cu 2>/dev/null
  done
  t2=$(now)
  plain="$plain $(echo "$t1 - $t0" | bc)"; occ="$occ $(echo "$t2 - $t1" | bc)"
  i=$((i + 1))
done
median() { echo "$@" | tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
p=$(median $plain); o=$(median $occ)
echo "plain nvcc -c:           median ${p}s  ($plain )"
echo "occ -c -keep -Xptxas -v: median ${o}s  ($occ )"
echo "ratio: $(echo "scale=3; $o / $p" | bc)"
