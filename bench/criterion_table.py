#!/usr/bin/env python3
"""Reads criterion's estimates (target/criterion) of the occ-model benches and
prints items 3, 4 and 15 of BENCHMARKS.md with their ratios against the targets."""

import json
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRIT = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "criterion"


def estimate(group, name):
    """(median ns, [low, high] ns of its 95 % confidence interval) or None."""
    path = CRIT / group / name / "new" / "estimates.json"
    if not path.is_file():
        return None
    m = json.loads(path.read_text())["median"]
    ci = m["confidence_interval"]
    return m["point_estimate"], (ci["lower_bound"], ci["upper_bound"])


def main():
    out = []
    parse = estimate("ptxas", "parse_log_10k_kernels")
    bench = json.loads((CRIT / "ptxas" / "parse_log_10k_kernels" / "new" / "benchmark.json")
                       .read_text()) if parse else None
    out.append("### 3. ptxas log parsing (criterion, release)\n")
    if parse:
        size = bench["throughput"]["Bytes"]
        mbs = size / 1e6 / (parse[0] / 1e9)
        lo = size / 1e6 / (parse[1][1] / 1e9)
        hi = size / 1e6 / (parse[1][0] / 1e9)
        verdict = "meets" if mbs >= 200 else "MISSES"
        out.append(f"{size / 1e6:.2f} MB log: median {parse[0] / 1e6:.2f} ms = **{mbs:.0f} MB/s** "
                   f"(95 % CI {lo:.0f}–{hi:.0f}); target ≥ 200 MB/s: {verdict} "
                   f"({mbs / 200:.1f}× the target)\n")
    else:
        out.append("not run\n")
    ours, theirs = estimate("sweep", "occ"), estimate("sweep", "cuda_occupancy_h")
    out.append("\n### 4. Full occupancy sweep, occ vs cuda_occupancy.h (criterion medians)\n")
    if ours and theirs:
        ratio = ours[0] / theirs[0]
        verdict = "meets" if ratio <= 1.0 else "MISSES"
        out.append("| side | median (ms) | 95 % CI (ms) |\n|---|---|---|\n")
        for label, e in [("occ-model `occupancy()`", ours), ("cuda_occupancy.h (harness bench, -O2)", theirs)]:
            out.append(f"| {label} | {e[0] / 1e6:.1f} | {e[1][0] / 1e6:.1f}–{e[1][1] / 1e6:.1f} |\n")
        out.append(f"\nocc / header = **{ratio:.2f}×**; target ≤ 1.00×: {verdict}\n")
    else:
        out.append("not run (see the bench's output)\n")
    small, big = estimate("views", "1000"), estimate("views", "10000")
    out.append("\n### 15. The build's views at 1,000 and 10,000 kernels x 2 archs (criterion medians)\n")
    if small and big:
        ratio = big[0] / small[0]
        verdict = "linear" if ratio <= 15 else "SUPER-LINEAR"
        out.append(f"1,000: {small[0] / 1e6:.1f} ms; 10,000: {big[0] / 1e6:.1f} ms; "
                   f"**{ratio:.1f}×** for 10× the rows; target ≤ 15×: {verdict}\n")
    else:
        out.append("not run\n")
    print("".join(out))


if __name__ == "__main__":
    main()
