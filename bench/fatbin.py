"""How to compress the fatbin occ embeds (BENCHMARKS.md section 12).

Compiles a few sources per arch as occ's jobs do (a cubin per arch, the
PTX of the newest arch; `-lineinfo` off, which is what occ embeds once the
line sections are cut out), then puts them together with the toolkit's
`fatbinary` under each compression setting, and once with `nvcc -fatbin`
itself (the reference of issue 25: `-Xfatbin=-compress-all`, the same
images). Prints one Markdown row per setting: size, ratio to the
reference, `fatbinary`'s time (median of REPS).

    python3 bench/fatbin.py [candle|cub]

candle: five of candle-kernels' files (affine, binary, fill, reduce,
unary; sm_80 + sm_90), read from cargo's registry folder (run `cargo
fetch` of a crate that depends on candle-kernels first, as bench/candle.py
does). cub: tests/corpus/cub_corpus.cu for sm_75, sm_90, sm_120.
Needs the nvcc of .cuda/ (scripts/cuda-toolkit) or NVCC=.
"""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NVCC = os.environ.get("NVCC", str(ROOT / ".cuda/cu13/nvidia/cu13/bin/nvcc"))
BIN = Path(NVCC).parent
REPS = int(os.environ.get("REPS", "3"))

SETTINGS = [
    ("none (`--compress=false`)", ["--compress=false"]),
    ("fatbinary's default (PTX only)", []),
    ("`-compress-all`", ["-compress-all"]),
    ("`-compress-all -compress-mode=speed`", ["-compress-all", "-compress-mode=speed"]),
    ("`-compress-all -compress-mode=balance`", ["-compress-all", "-compress-mode=balance"]),
    ("`-compress-all -compress-mode=size`", ["-compress-all", "-compress-mode=size"]),
    ("`-compress-all -concat`", ["-compress-all", "-concat"]),
]


def candle_sources():
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    found = sorted(home.glob("registry/src/*/candle-kernels-*/src"))
    if not found:
        sys.exit("no candle-kernels in cargo's registry folder: cargo fetch a crate that depends on it")
    src = found[-1]
    return [src / f"{n}.cu" for n in ("affine", "binary", "fill", "reduce", "unary")], ["sm_80", "sm_90"], [f"-I{src}"]


def cub_sources():
    return [ROOT / "tests/corpus/cub_corpus.cu"], ["sm_75", "sm_90", "sm_120"], []


def run(cmd):
    start = time.monotonic()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed:\n{p.stderr}")
    return time.monotonic() - start


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "candle"
    sources, archs, extra = {"candle": candle_sources, "cub": cub_sources}[which]()
    work = Path(tempfile.mkdtemp(prefix="occ-fatbin-"))
    images = []  # per source: list of (kind, sm, file)
    for src in sources:
        parts = []
        for arch in archs:
            cubin = work / f"{src.stem}.{arch}.cubin"
            run([NVCC, "-cubin", f"-arch={arch}", *extra, "-o", cubin, src])
            parts.append(("elf", arch[3:], cubin))
        ptx = work / f"{src.stem}.{archs[-1]}.ptx"
        run([NVCC, "-ptx", f"-arch={archs[-1]}", *extra, "-o", ptx, src])
        parts.append(("ptx", archs[-1][3:], ptx))
        images.append((src, parts))

    def fatbins(flags, tag):
        total, walls = 0, []
        for rep in range(REPS):
            wall = 0.0
            for src, parts in images:
                out = work / f"{src.stem}.{tag}.fatbin"
                args = [BIN / "fatbinary", f"--create={out}", "-64", *flags]
                args += [f"--image3=kind={k},sm={sm},file={f}" for k, sm, f in parts]
                wall += run(args)
                if rep == 0:
                    total += out.stat().st_size
            walls.append(wall)
        return total, statistics.median(walls)

    reference = 0
    for src in sources:
        out = work / f"{src.stem}.nvcc.fatbin"
        gencode = []
        for arch in archs[:-1]:
            gencode += ["-gencode", f"arch=compute_{arch[3:]},code={arch}"]
        last = archs[-1][3:]
        gencode += ["-gencode", f"arch=compute_{last},code=[sm_{last},compute_{last}]"]
        run([NVCC, "-fatbin", "-Xfatbin=-compress-all", *gencode, *extra, "-o", out, src])
        reference += out.stat().st_size
    print(f"# {which}: {len(sources)} files x {', '.join(archs)}; load {open('/proc/loadavg').read().split()[:3]}")
    print(f"reference `nvcc -fatbin -Xfatbin=-compress-all`, no line info: {reference} B")
    print("| fatbinary setting | bytes | × reference | fatbinary s (median of %d) |" % REPS)
    print("|---|---:|---:|---:|")
    for label, flags in SETTINGS:
        size, wall = fatbins(flags, str(abs(hash(label))))
        print(f"| {label} | {size} | {size / reference:.3f} | {wall:.2f} |")


if __name__ == "__main__":
    main()
