#!/usr/bin/env python3
"""What kernels.rs costs rustc, and what the rlib holds (issue 25 item 3).

Two crates built once with the occ-build of this tree (OCC_ROOT, default
this checkout), then rustc of each crate timed with lib.rs in four forms,
interleaved, REPS times each (`CARGO_INCREMENTAL=0`, dev profile; a
`RUSTC_WRAPPER` runs `/usr/bin/time` on the crate's own rustc: wall and
peak RSS):

- `none`: no kernels.rs and no device code;
- `bytes`: no kernels.rs, the same blobs by `include_bytes!` (the baseline
  of BENCHMARKS.md section 8's kernels.rs table);
- `before`: kernels.rs as occ-build emitted it before this change (the
  blobs' table inline, each blob by `include_bytes!`), made from the
  `after` files by putting `include_bytes!` back in place of
  `occ::__device_code!`;
- `after`: kernels.rs and device_code.rs as this tree emits them.

Crates: candle-kernels (crates.io source in ~/.cargo/registry, as
bench/candle.py's variant (b): its 11 PTX files, `Embed::Ptx`, sm_80) and
one generated `.cu` of 2,000 small kernels for sm_80, sm_90 and sm_100
(default fatbin), as bench/candle.py's `big`. For each: the rlib's members
(lib.rmeta and the objects) against the embedded bytes, per form.

OCC_NO_NVCC=1 builds each crate from an `occ.lock` at its root (copy a
build's `occ.lock.new` there): no nvcc and no device code, so the forms
differ by kernels.rs alone (the device code's own cost, `bytes` − `none`,
is measured with nvcc).

With BASE_GEN (issue 39): the forms are `none`, `base` and `after`,
where `base` is kernels.rs as another occ tree's generator writes it for
the same manifest: BASE_GEN is a program run as `BASE_GEN manifest.json
out.rs` (bench/gen-kernels-rs.sh builds one from a tree's occ-model).
Its kernels.rs must compile against this tree's `occ` crate (true of
main before issue 39: the table's types did not change). So the two
generators' cost is timed side by side in one run, on the same crate,
manifest and blobs.

Run: `python3 bench/kernels_rs.py` (REPS=3; BENCH_DIR, default
/tmp/occ-bench/kernels-rs; CRATES=candle,big). Prints a Markdown table
and writes results.json.
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("BENCH_DIR", "/tmp/occ-bench/kernels-rs")
import candle  # noqa: E402  (the helpers of bench/candle.py)

BENCH = candle.BENCH
OCC = candle.OCC
REPS = int(os.environ.get("REPS", "3"))
BASE_GEN = os.environ.get("BASE_GEN")
FORMS = (["none", "base", "after"] if os.environ.get("OCC_NO_NVCC") else ["none", "bytes", "base", "after"]) if BASE_GEN else ["none", "bytes", "before", "after"]
CRATES = {"candle": "candle_kernels", "big": "occbench_big"}
TIMES = BENCH / "rustc-times.log"
WRAPPER = BENCH / "bin/rustc-timed.sh"


def setup():
    candle.setup_wrappers()
    candle.write(WRAPPER, f"""#!/bin/sh
case " $* " in
  *" --crate-name candle_kernels "*|*" --crate-name occbench_big "*)
    case " $* " in *" --crate-type lib "*)
      exec /usr/bin/time -a -o '{TIMES}' -f '%e %M' "$@";;
    esac;;
esac
exec "$@"
""", 0o755)


def cargo(crate, args):
    e = candle.env({"NVCC": candle.NVCC, "OCC_NVCC_LAUNCHER": str(candle.LAUNCHER)})
    e["RUSTC_WRAPPER"] = str(WRAPPER)
    if os.environ.get("OCC_NO_NVCC"):
        # A build from the crate's occ.lock: no nvcc, no device code.
        e["OCC_NO_NVCC"] = os.environ["OCC_NO_NVCC"]
    p = subprocess.run(["nice", "cargo", *args, "--offline", "--message-format=json-render-diagnostics"],
                       cwd=crate, env=e, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"cargo {' '.join(args)} failed in {crate}:\n{p.stdout[-3000:]}\n{p.stderr[-6000:]}")
    msgs = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    return msgs


def out_dir(msgs):
    for m in msgs:
        if m.get("reason") == "build-script-executed" and Path(m["out_dir"]).joinpath("occ").is_dir():
            return Path(m["out_dir"])
    return None


def rlib(msgs):
    for m in msgs:
        if m.get("reason") == "compiler-artifact" and "lib" in m["target"]["kind"]:
            for f in m["filenames"]:
                if f.endswith(".rlib") and any(n in f for n in CRATES.values()):
                    return Path(f)
    return None


def toml(name, lib_name=None):
    lib = f'\n[lib]\nname = "{lib_name}"\npath = "src/lib.rs"\n' if lib_name else ""
    return (f'[package]\nname = "{name}"\nversion = "0.0.0"\nedition = "2021"\n\n[workspace]\n{lib}\n'
            f'[dependencies]\nocc = {{ path = "{OCC / "occ"}", default-features = false }}\n\n'
            f'[build-dependencies]\nocc-build = {{ path = "{OCC / "occ-build"}" }}\n')


def before_text(occ_dir):
    """kernels.rs as the previous occ-build wrote it: the blobs' table
    inline, each blob by include_bytes!."""
    rs = (occ_dir / "kernels.rs").read_text()
    dc = (occ_dir / "device_code.rs").read_text()
    dc = re.sub(r'::occ::__device_code!\(\w+, ("[^"]*"), \d+\)',
                r'include_bytes!(concat!(env!("OUT_DIR"), \1))', dc)
    dc = "\n".join(l for l in dc.splitlines() if not l.startswith("//"))
    line = 'include!(concat!(env!("OUT_DIR"), "/occ/device_code.rs"));'
    assert line in rs, "kernels.rs includes device_code.rs"
    return rs.replace(line, dc.strip())


def base_text(occ_dir):
    """kernels.rs as BASE_GEN writes it for this build's manifest."""
    out = occ_dir / "kernels_base.rs"
    subprocess.run([BASE_GEN, str(occ_dir / "manifest.json"), str(out)], check=True)
    return out.read_text()


def blobs(occ_dir):
    """(source, file) of each blob, from the manifest."""
    m = json.loads((occ_dir / "manifest.json").read_text())
    return [(b["source"], b["file"]) for b in m["device_code"] if b.get("file")]


# ---- the two crates -------------------------------------------------------

def candle_source():
    """candle-kernels' source as cargo unpacked it (~/.cargo/registry/src);
    bench/candle.py's `fetch_candle` downloads it when it is not there."""
    home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    found = sorted(home.glob("registry/src/*/candle-kernels-*/src/lib.rs"))
    if found:
        return found[-1].parent.parent
    return candle.fetch_candle()[1]


def candle_crate():
    src_root = candle_source()
    crate = BENCH / "candle_ptx_sm80"
    if not (crate / "src").is_dir():
        candle.copy_source(src_root, crate)
        (crate / "Cargo.toml.orig").unlink(missing_ok=True)
    ptx = candle.ptx_files(src_root / "src")
    candle.write(crate / "Cargo.toml", toml("candle-kernels", "candle_kernels"))
    candle.write(crate / "build.rs", candle.occ_build_rs(ptx, [], ["sm_80"], "Ptx", False))
    if not (crate / "Cargo.lock").exists():
        shutil.copy(OCC / "Cargo.lock", crate / "Cargo.lock")
    lib = (src_root / "src/lib.rs").read_text()
    forms = {
        "after": candle.occ_lib_rs(lib, ptx, "Ptx"),
        "before": candle.occ_lib_rs(lib, ptx, "Ptx").replace("/occ/kernels.rs", "/occ/kernels_before.rs"),
        "base": candle.occ_lib_rs(lib, ptx, "Ptx").replace("/occ/kernels.rs", "/occ/kernels_base.rs"),
    }
    return crate, ptx, lib, forms


def candle_forms(lib, ptx, occ_dir, forms):
    # From the lock there are no blobs: `none` names none, `bytes` is moot.
    files = dict(blobs(occ_dir)) or {f: "none" for f in ptx}
    forms["bytes"] = candle.occ_lib_rs(lib, ptx, "Ptx", False, files)
    none = candle.occ_lib_rs(lib, ptx, "Ptx", False, files)
    # No device code (candle's lib.rs reads each module's blob in a closure).
    none = re.sub(r'include_bytes!\(concat!\(env!\("OUT_DIR"\), "[^"]*"\)\)', '&[]', none)
    forms["none"] = none
    return forms


BIG_AFTER = """pub mod occ {
    include!(concat!(env!("OUT_DIR"), "/occ/KERNELS"));
}

pub fn lookup(name: &str) -> Option<usize> {
    occ::get(name).map(|k| k.archs.len())
}
"""


def big_crate():
    crate = BENCH / "occbench_big"
    candle.write(crate / "Cargo.toml", toml("occbench_big"))
    candle.write(crate / "build.rs", "fn main() {\n    occ_build::Build::new()\n"
                 f'        .file("kernels/many.cu")\n        .archs([{", ".join(json.dumps(a) for a in candle.BIG_ARCHS)}])\n'
                 "        .compile();\n}\n")
    candle.write(crate / "kernels/many.cu", candle.big_cu(candle.BIG_KERNELS))
    if not (crate / "Cargo.lock").exists():
        shutil.copy(OCC / "Cargo.lock", crate / "Cargo.lock")
    return crate, {"after": BIG_AFTER.replace("KERNELS", "kernels.rs"),
                   "before": BIG_AFTER.replace("KERNELS", "kernels_before.rs"),
                   "base": BIG_AFTER.replace("KERNELS", "kernels_base.rs")}


def big_forms(occ_dir, forms):
    files = [f for _, f in blobs(occ_dir)]
    forms["bytes"] = "".join(
        f'pub static BLOB_{i}: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/occ/{f}"));\n'
        for i, f in enumerate(files))
    forms["none"] = "pub fn lookup(name: &str) -> Option<usize> {\n    name.find('x')\n}\n"
    return forms


# ---- measuring ------------------------------------------------------------

def rustc_runs():
    try:
        return [tuple(float(x) for x in l.split()) for l in TIMES.read_text().splitlines()
                if re.fullmatch(r"[\d.]+ \d+", l.strip())]
    except FileNotFoundError:
        return []


def measure(name, crate, forms, occ_dir):
    embedded = sum((occ_dir / f).stat().st_size for _, f in blobs(occ_dir))
    res = {f: {"walls": [], "mibs": []} for f in FORMS}
    for rep in range(REPS + 1):  # the first round warms the caches, untimed
        for form in FORMS:
            candle.write(crate / "src/lib.rs", forms[form])
            os.utime(crate / "src/lib.rs")
            before = len(rustc_runs())
            msgs = cargo(crate, ["build"])
            runs = rustc_runs()[before:]
            assert runs, f"{name} {form}: rustc was not timed"
            if rep:
                res[form]["walls"].append(runs[-1][0])
                res[form]["mibs"].append(runs[-1][1] / 1024)
            path = rlib(msgs)
            if path:
                meta, objs = candle.rlib_parts(path)
                res[form].update(rlib=path.stat().st_size, rmeta=meta, objects=objs)
    base = occ_dir / "kernels_base.rs"
    return {"embedded": embedded, "kernels_rs": (occ_dir / "kernels.rs").stat().st_size,
            "base_rs": base.stat().st_size if base.exists() else 0,
            "device_code_rs": (occ_dir / "device_code.rs").stat().st_size, "forms": res}


def build_once(crate, forms_after):
    candle.write(crate / "src/lib.rs", forms_after)
    return out_dir(cargo(crate, ["build"]))


def main():
    BENCH.mkdir(parents=True, exist_ok=True)
    setup()
    meta = {"start": time.strftime("%F %T UTC", time.gmtime()),
            "load_start": open("/proc/loadavg").read().split()[:3],
            "occ": subprocess.run(["git", "-C", str(OCC), "rev-parse", "--short", "HEAD"],
                                  capture_output=True, text=True).stdout.strip(), "reps": REPS}
    results = {}
    which = os.environ.get("CRATES", "candle,big").split(",")
    if "candle" in which:
        crate, ptx, lib, forms = candle_crate()
        d = build_once(crate, forms["after"])
        occ_dir = find_occ(crate, "candle-kernels", d)
        prepare(occ_dir)
        candle_forms(lib, ptx, occ_dir, forms)
        n = len(json.loads((occ_dir / "manifest.json").read_text())["kernels"])
        results[f"candle-kernels (PTX sm_80): {n} kernels"] = measure("candle", crate, forms, occ_dir)
    if "big" in which:
        crate, forms = big_crate()
        d = build_once(crate, forms["after"])
        occ_dir = find_occ(crate, "occbench_big", d)
        prepare(occ_dir)
        big_forms(occ_dir, forms)
        n = len(json.loads((occ_dir / "manifest.json").read_text())["kernels"])
        results[f"{n} kernels × {len(candle.BIG_ARCHS)} archs (fatbin)"] = measure("big", crate, forms, occ_dir)
    meta["end"] = time.strftime("%F %T UTC", time.gmtime())
    meta["load_end"] = open("/proc/loadavg").read().split()[:3]
    (BENCH / "results.json").write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    print(report(meta, results))


def prepare(occ_dir):
    """The other forms' kernels.rs beside this tree's."""
    if BASE_GEN:
        base_text(occ_dir)
    else:
        (occ_dir / "kernels_before.rs").write_text(before_text(occ_dir))


def find_occ(crate, pkg, d):
    if d is not None:
        return d / "occ"
    found = sorted(candle.TARGET.glob(f"debug/build/{pkg}-*/out/occ/kernels.rs"),
                   key=lambda p: p.stat().st_mtime)
    if not found:
        sys.exit(f"no OUT_DIR of {pkg}")
    return found[-1].parent


def report(meta, results):
    out = [f"occ {meta['occ']}; REPS={meta['reps']}; {meta['start']} (load {' '.join(meta['load_start'])})"
           f" – {meta['end']} (load {' '.join(meta['load_end'])})\n\n"]
    for name, r in results.items():
        f = r["forms"]
        med = {k: statistics.median(v["walls"]) for k, v in f.items()}
        best = {k: min(v["walls"]) for k, v in f.items()}
        mib = {k: max(v["mibs"]) for k, v in f.items()}
        out.append(f"#### {name}: embedded {r['embedded'] / 1e6:.2f} MB; kernels.rs "
                   f"{r['kernels_rs'] / 1e6:.2f} MB, device_code.rs {r['device_code_rs'] / 1e3:.1f} kB\n\n")
        out.append("| lib.rs | rustc wall, s (runs) | median | best | peak RSS MiB | rlib MB | lib.rmeta MB | objects MB |\n")
        out.append("|---|---|---|---|---|---|---|---|\n")
        for k in FORMS:
            v = f[k]
            out.append(f"| {k} | {', '.join(f'{w:.2f}' for w in v['walls'])} | {med[k]:.2f} | {best[k]:.2f} | "
                       f"{mib[k]:.0f} | {v.get('rlib', 0) / 1e6:.2f} | {v.get('rmeta', 0) / 1e6:.2f} | "
                       f"{v.get('objects', 0) / 1e6:.2f} |\n")
        if BASE_GEN:
            base_rs = r.get("base_rs", 0)
            if "bytes" in med:
                out.append(f"\nOver `bytes` (the same blobs by include_bytes!, no kernels.rs; median): "
                           f"base +{med['base'] - med['bytes']:.2f} s, after {med['after'] - med['bytes']:+.2f} s.")
            out.append(f"\nkernels.rs over `none` (median): base +{med['base'] - med['none']:.2f} s, "
                       f"after +{med['after'] - med['none']:.2f} s (best: base "
                       f"+{best['base'] - best['none']:.2f}, after +{best['after'] - best['none']:.2f}); "
                       f"per round, after − none: "
                       f"{', '.join(f'{a - n:+.2f}' for a, n in zip(f['after']['walls'], f['none']['walls']))}; "
                       f"base − none: "
                       f"{', '.join(f'{a - n:+.2f}' for a, n in zip(f['base']['walls'], f['none']['walls']))}. "
                       f"Peak RSS after − none: {mib['after'] - mib['none']:+.0f} MiB, base − none: "
                       f"{mib['base'] - mib['none']:+.0f} MiB. kernels.rs {r['kernels_rs'] / 1e6:.2f} MB "
                       f"(base {base_rs / 1e6:.2f} MB).\n\n")
            continue
        out.append(f"\nkernels.rs over `none` (median): before +{med['before'] - med['none']:.2f} s, "
                   f"after +{med['after'] - med['none']:.2f} s; over `bytes`: before "
                   f"+{med['before'] - med['bytes']:.2f} s, after {med['after'] - med['bytes']:+.2f} s. "
                   f"Peak RSS after − none: {mib['after'] - mib['none']:+.0f} MiB. "
                   f"rlib after / embedded: {f['after'].get('rlib', 0) / max(r['embedded'], 1):.3f}; "
                   f"before: {f['before'].get('rlib', 0) / max(r['embedded'], 1):.3f}.\n\n")
    return "".join(out)


if __name__ == "__main__":
    main()
