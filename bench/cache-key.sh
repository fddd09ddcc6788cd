#!/usr/bin/env bash
# Warm no-op cost per job of occ-build's job cache: this tree against the old
# cache at commit 63ddf56 (BENCHMARKS.md item 7, issue 12), on the same
# machine in one run. Prints a Markdown table.
#
#   bench/cache-key.sh
#
# Environment: BENCH_DIR (scratch crates and their target dirs, default
# /tmp/occ-cache-bench), REPS (warm runs of each build script, default 15),
# OLD (the old commit, default 63ddf56), NVCC (default .cuda's nvcc 13.5).
#
# Two copies of one generated crate (16 .cu files: 8 small ones that include
# a local header, 8 that include <cuda_fp16.h>; sm_80 and sm_90: 32 jobs),
# one with `occ-build = { path = <this tree> }`, one with the old tree (a
# temporary git worktree of OLD), each with its own CARGO_TARGET_DIR. Each is
# built once (cold, untimed), then its compiled build-script-build is run
# directly, as cargo runs it, REPS times, old and new alternating. nvcc runs
# are counted by an OCC_NVCC_LAUNCHER wrapper.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BENCH_DIR="${BENCH_DIR:-/tmp/occ-cache-bench}"
REPS="${REPS:-15}"
OLD="${OLD:-63ddf56}"
NVCC="${NVCC:-$ROOT/.cuda/cu13/nvidia/cu13/bin/nvcc}"
NVCC="$(readlink -f "$NVCC")"
JOBS=32
HOST_TRIPLE="$(rustc -vV | sed -n 's/^host: //p')"

[[ -x "$NVCC" ]] || { echo "no nvcc at $NVCC (set NVCC)" >&2; exit 1; }
mkdir -p "$BENCH_DIR"
BENCH_DIR="$(cd "$BENCH_DIR" && pwd)"
TMP="$(mktemp -d)"
OLD_TREE="$TMP/old"
cleanup() {
    git -C "$ROOT" worktree remove --force "$OLD_TREE" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

load() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD_BEFORE="$(load)"
START="$(date -u '+%F %T UTC')"

# ---- the old tree -----------------------------------------------------------
git -C "$ROOT" worktree add --detach --quiet "$OLD_TREE" "$OLD"
ln -s "$ROOT/.cuda" "$OLD_TREE/.cuda"
OLD_COMMIT="$(git -C "$OLD_TREE" rev-parse --short HEAD)"
NEW_COMMIT="$(git -C "$ROOT" rev-parse --short HEAD)"
if [[ -n "$(git -C "$ROOT" status --porcelain -- occ-build occ-model)" ]]; then
    NEW_COMMIT="$NEW_COMMIT + uncommitted changes"
fi

# ---- counting launcher --------------------------------------------------------
COUNT_LOG="$BENCH_DIR/nvcc-calls.log"
LAUNCHER="$BENCH_DIR/count-nvcc.sh"
printf '#!/bin/sh\necho "$*" >> %q\nexec "$@"\n' "$COUNT_LOG" > "$LAUNCHER"
chmod 755 "$LAUNCHER"
calls() { if [[ -f "$COUNT_LOG" ]]; then wc -l < "$COUNT_LOG"; else echo 0; fi; }

# ---- the crates ---------------------------------------------------------------
write_crate() { # <dir> <occ-build path> <Cargo.lock text>
    local dir="$1" occ="$2" lock="$3" i
    rm -rf "$dir/kernels" "$dir/src"
    mkdir -p "$dir/kernels" "$dir/src"
    cat > "$dir/Cargo.toml" <<EOF
[package]
name = "occcache"
version = "0.1.0"
edition = "2021"

[workspace]

[build-dependencies]
occ-build = { path = "$occ" }
EOF
    # The tree's own lock file pins the same dependency versions (cargo
    # drops what the crate does not use).
    [[ -f "$dir/Cargo.lock" ]] || printf '%s\n' "$lock" > "$dir/Cargo.lock"
    cat > "$dir/build.rs" <<'EOF'
fn main() {
    occ_build::Build::new()
        .glob("kernels/*.cu")
        .include("kernels")
        .archs(["sm_80", "sm_90"])
        .compile();
}
EOF
    printf 'fn main() {\n    println!("built");\n}\n' > "$dir/src/main.rs"
    cat > "$dir/kernels/common.cuh" <<'EOF'
#pragma once
#define OCC_BENCH_SCALE 2.0f
template <typename T> __device__ __forceinline__ T occ_bench_clamp(T v, T lo, T hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}
EOF
    for i in 0 1 2 3 4 5 6 7; do
        cat > "$dir/kernels/small$i.cu" <<EOF
#include "common.cuh"
extern "C" __global__ void scale$i(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = occ_bench_clamp(p[i] * OCC_BENCH_SCALE + $i.0f, -1e3f, 1e3f);
}
template <int BLOCK>
__global__ void __launch_bounds__(BLOCK) sum$i(const float* in, float* out, int n) {
  __shared__ float s[BLOCK];
  float acc = 0.0f;
  for (int i = blockIdx.x * BLOCK + threadIdx.x; i < n; i += gridDim.x * BLOCK) acc += in[i];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int w = BLOCK / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}
template __global__ void sum$i<256>(const float*, float*, int);
EOF
        cat > "$dir/kernels/half$i.cu" <<EOF
#include <cuda_fp16.h>
extern "C" __global__ void axpy_half$i(const __half* x, __half* y, __half a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __hfma(a, x[i], y[i]);
}
extern "C" __global__ void to_float$i(const __half2* in, float2* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __half22float2(__hmul2(in[i], __float2half2_rn($i.5f)));
}
EOF
    done
}

NEW_CRATE="$BENCH_DIR/new"
OLD_CRATE="$BENCH_DIR/old"
write_crate "$NEW_CRATE" "$ROOT/occ-build" "$(cat "$ROOT/Cargo.lock")"
write_crate "$OLD_CRATE" "$OLD_TREE/occ-build" "$(git -C "$ROOT" show "$OLD:Cargo.lock")"

# What cargo passes a build script, less the variables of the caller's own
# cargo (this script may run under one).
clean_env() {
    env -u OUT_DIR -u NVCC -u RUSTFLAGS -u OCC_ARCHS -u CUDA_COMPUTE_CAP \
        -u NVCC_APPEND_FLAGS -u NVCC_PREPEND_FLAGS -u NVCC_CCBIN -u OCC_CUDA_DIR \
        -u OCC_NO_NVCC -u OCC_BLESS -u CI \
        $(env | sed -n 's/^\(CARGO_[A-Z_]*\)=.*/-u \1/p' | grep -v CARGO_HOME) \
        NVCC="$NVCC" OCC_NVCC_LAUNCHER="$LAUNCHER" "$@"
}

cargo_build() { # <crate> <target dir> ; prints wall ms
    local t0 t1
    t0=$EPOCHREALTIME
    (cd "$1" && clean_env CARGO_TARGET_DIR="$2" nice cargo build --offline -q) \
        || { echo "cargo build failed in $1" >&2; exit 1; }
    t1=$EPOCHREALTIME
    python3 -c "print(f'{($t1 - $t0) * 1000:.1f}')"
}

# The build script binary and OUT_DIR cargo used: the build/<pkg>-<hash>/
# whose out/ has an `output` file next to it, and its script folder.
find_script() { # <target dir> ; prints "<binary> <out dir>"
    local run bin
    run="$(ls -dt "$1"/debug/build/occcache-*/output | head -1)"
    run="$(dirname "$run")"
    bin="$(ls -t "$1"/debug/build/occcache-*/build-script-build | head -1)"
    echo "$bin $run/out"
}

echo "cold builds (untimed; compiles occ-build twice and runs nvcc $((JOBS * 2)) times)..." >&2
: > "$COUNT_LOG"
cargo_build "$OLD_CRATE" "$BENCH_DIR/target-old" > /dev/null
OLD_COLD_CALLS="$(calls)"
: > "$COUNT_LOG"
cargo_build "$NEW_CRATE" "$BENCH_DIR/target-new" > /dev/null
NEW_COLD_CALLS="$(calls)"

read -r OLD_BIN OLD_OUT < <(find_script "$BENCH_DIR/target-old")
read -r NEW_BIN NEW_OUT < <(find_script "$BENCH_DIR/target-new")

NUM_JOBS="$(nproc)"
run_script() { # <binary> <crate> <out dir> ; prints wall ms, fails on error
    local t0 t1
    t0=$EPOCHREALTIME
    (cd "$2" && clean_env CARGO_MANIFEST_DIR="$2" OUT_DIR="$3" CARGO_PKG_NAME=occcache \
        CARGO_PKG_VERSION=0.1.0 CARGO_MANIFEST_PATH="$2/Cargo.toml" \
        TARGET="$HOST_TRIPLE" HOST="$HOST_TRIPLE" NUM_JOBS="$NUM_JOBS" PROFILE=debug \
        OPT_LEVEL=0 DEBUG=true RUSTC=rustc CARGO_ENCODED_RUSTFLAGS= "$1" > "$TMP/script.out" 2>&1) \
        || { echo "$1 failed:" >&2; cat "$TMP/script.out" >&2; exit 1; }
    t1=$EPOCHREALTIME
    python3 -c "print(f'{($t1 - $t0) * 1000:.1f}')"
}

# One untimed warm run each (page cache, the new toolkit identity record).
: > "$COUNT_LOG"
run_script "$OLD_BIN" "$OLD_CRATE" "$OLD_OUT" > /dev/null
run_script "$NEW_BIN" "$NEW_CRATE" "$NEW_OUT" > /dev/null
WARMUP_CALLS="$(calls)"

echo "warm build-script runs: $REPS each, alternating..." >&2
OLD_MS=() NEW_MS=() OLD_CALLS=0 NEW_CALLS=0
for ((r = 0; r < REPS; r++)); do
    c0="$(calls)"
    OLD_MS+=("$(run_script "$OLD_BIN" "$OLD_CRATE" "$OLD_OUT")")
    c1="$(calls)"
    NEW_MS+=("$(run_script "$NEW_BIN" "$NEW_CRATE" "$NEW_OUT")")
    c2="$(calls)"
    OLD_CALLS=$((OLD_CALLS + c1 - c0))
    NEW_CALLS=$((NEW_CALLS + c2 - c1))
done

echo "cargo build no-op: 5 each, alternating..." >&2
OLD_CARGO=() NEW_CARGO=()
c0="$(calls)"
for r in 1 2 3 4 5; do
    OLD_CARGO+=("$(cargo_build "$OLD_CRATE" "$BENCH_DIR/target-old")")
    NEW_CARGO+=("$(cargo_build "$NEW_CRATE" "$BENCH_DIR/target-new")")
done
CARGO_CALLS=$(($(calls) - c0))

# Inputs per job: the new record's `inputs` (its `"path"` entries) and
# `probes`; the old `.d` file's lines. For one small job, one cuda_fp16.h job,
# and all 32.
inputs_new() { # <file stem, or "" for all jobs>: prints "<inputs> <probes>"
    python3 - "$NEW_OUT/occ/cache" "$1" <<'EOF'
import json, pathlib, sys
inputs = probes = 0
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    rec = json.loads(f.read_text())
    if "inputs" not in rec or sys.argv[2] not in f.name:
        continue
    inputs += len(rec["inputs"])
    probes += len(rec["probes"])
    if sys.argv[2]:
        break
print(inputs, probes)
EOF
}
inputs_old() { # <file stem, or "" for all jobs>
    local files=("$OLD_OUT"/occ/cache/*"$1"*.d)
    if [[ -n "$1" ]]; then files=("${files[0]}"); fi
    cat "${files[@]}" | wc -l
}
read -r NEW_SMALL_INPUTS NEW_SMALL_PROBES < <(inputs_new small0)
read -r NEW_HALF_INPUTS NEW_HALF_PROBES < <(inputs_new half0)
read -r NEW_ALL_INPUTS NEW_ALL_PROBES < <(inputs_new "")
OLD_SMALL_DEPS="$(inputs_old small0)"
OLD_HALF_DEPS="$(inputs_old half0)"
OLD_ALL_DEPS="$(inputs_old "")"

LOAD_AFTER="$(load)"

python3 - "$REPS" "$JOBS" "${OLD_MS[*]}" "${NEW_MS[*]}" "${OLD_CARGO[*]}" "${NEW_CARGO[*]}" <<EOF
import statistics, sys
reps, jobs = int(sys.argv[1]), int(sys.argv[2])
old, new, old_cargo, new_cargo = ([float(x) for x in a.split()] for a in sys.argv[3:7])
med = statistics.median
print("# occ-build warm job cache check, $START, $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')")
print()
print("nvcc: $NVCC; old: $OLD_COMMIT; new: $NEW_COMMIT; $JOBS jobs (16 .cu x sm_80, sm_90); NUM_JOBS=$NUM_JOBS")
print("Load average before: $LOAD_BEFORE; after: $LOAD_AFTER")
print()
print("| figure | old cache ($OLD_COMMIT) | new cache | new - old |")
print("|---|---|---|---|")
print(f"| warm build script, median of {reps} (ms) | {med(old):.1f} | {med(new):.1f} | {med(new) - med(old):+.1f} |")
print(f"| warm build script, min (ms) | {min(old):.1f} | {min(new):.1f} | {min(new) - min(old):+.1f} |")
print(f"| per job, median / {jobs} (ms) | {med(old) / jobs:.2f} | {med(new) / jobs:.2f} | **{(med(new) - med(old)) / jobs:+.2f}** |")
print(f"| per job, min / {jobs} (ms) | {min(old) / jobs:.2f} | {min(new) / jobs:.2f} | {(min(new) - min(old)) / jobs:+.2f} |")
print(f"| \`cargo build\` no-op, median of 5 (ms) | {med(old_cargo):.1f} | {med(new_cargo):.1f} | {med(new_cargo) - med(old_cargo):+.1f} |")
print(f"| nvcc runs, cold build | $OLD_COLD_CALLS | $NEW_COLD_CALLS | |")
print(f"| nvcc runs, {reps} warm script runs (+1 untimed each: $WARMUP_CALLS) | $OLD_CALLS | $NEW_CALLS | |")
print(f"| nvcc runs, 5 \`cargo build\` no-ops each (both) | $CARGO_CALLS | | |")
print(f"| inputs of one small .cu job (local header) | $OLD_SMALL_DEPS (\`.d\` lines) | $NEW_SMALL_INPUTS inputs + $NEW_SMALL_PROBES probes | |")
print(f"| inputs of one cuda_fp16.h job | $OLD_HALF_DEPS | $NEW_HALF_INPUTS inputs + $NEW_HALF_PROBES probes | |")
print(f"| inputs, all {jobs} jobs | $OLD_ALL_DEPS | $NEW_ALL_INPUTS inputs + $NEW_ALL_PROBES probes | |")
print()
print("Runs (ms), old:", ", ".join(f"{x:.0f}" for x in old))
print("Runs (ms), new:", ", ".join(f"{x:.0f}" for x in new))
print("cargo build no-op (ms), old:", ", ".join(f"{x:.0f}" for x in old_cargo), "; new:", ", ".join(f"{x:.0f}" for x in new_cargo))
EOF
