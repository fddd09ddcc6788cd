#!/usr/bin/env python3
"""occ beside cuxray: see bench/cuxray.sh, which runs this."""

import json
import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = Path(os.environ.get("BENCH_DIR", "/tmp/occ-bench/cuxray"))
VERSION = os.environ.get("CUXRAY_VERSION", "0.6.0")
SMOKE = os.environ.get("SMOKE") == "1"
BIN = ROOT / ".cuda/cu13/nvidia/cu13/bin"
NVCC = Path(os.environ.get("NVCC", BIN / "nvcc"))

# The two corpora: (crate name, kernels to copy, archs of the build).
CORPORA = [
    ("example_app_kernels", sorted((ROOT / "example-app/kernels").glob("*")),
     ["sm_80", "sm_86", "sm_90"]),
    ("cub_corpus", [ROOT / "tests/corpus/cub_corpus.cu"],
     ["sm_75", "sm_80", "sm_86", "sm_90", "sm_120"]),
    # Neither corpus spills much: the test suite's spilling kernels too.
    ("spill_fixtures", [ROOT / p for p in [
        "tests/ui/kernels/loop.cu", "tests/ui/kernels/ui.cu",
        "tests/fixtures/cu/lines/tmpl.cu", "tests/fixtures/cu/lines/spill.cuh",
        "tests/fixtures/cu/explain/k.cu", "tests/fixtures/cu/sweep/forces.cu",
        "tests/fixtures/cu/macro_new_user/crunch.cu"]],
     ["sm_75", "sm_80", "sm_90", "sm_120"]),
]


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def venv():
    """cuxray in a scratch venv; its executable."""
    env = WORK / "venv"
    exe = env / "bin" / "cuxray"
    if not exe.exists():
        run([sys.executable, "-m", "venv", str(env)])
        try:
            run([str(env / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check",
                 f"cuxray=={VERSION}"])
        except subprocess.CalledProcessError:
            sys.exit(f"cuxray.sh: pip could not install cuxray=={VERSION} into {env}: "
                     "is PyPI reachable from here? (pip download cuxray==0.6.0 tells)")
    out = run([str(exe), "--version"], capture_output=True, text=True).stdout.strip()
    print(f"# {out} in {env}")
    return exe


def toolchain():
    """A folder holding nvdisasm, cuobjdump and ptxas of the toolkit occ uses."""
    tc = WORK / "toolchain"
    tc.mkdir(parents=True, exist_ok=True)
    for tool in ("nvdisasm", "cuobjdump", "ptxas"):
        src = NVCC.parent / tool
        if not src.exists():
            sys.exit(f"cuxray.sh: no {tool} beside {NVCC}; run scripts/cuda-toolkit")
        link = tc / tool
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(src)
    return tc


def occ_build(name, files, archs):
    """A scratch crate whose build.rs compiles `files` with occ-build for
    `archs`; the folder with its manifest.json and cubins."""
    crate = WORK / name
    kernels = crate / "kernels"
    if kernels.exists():
        shutil.rmtree(kernels)
    kernels.mkdir(parents=True)
    for f in files:
        shutil.copy(f, kernels / f.name)
    (crate / "src").mkdir(exist_ok=True)
    (crate / "src" / "main.rs").write_text("fn main() {}\n")
    (crate / "Cargo.toml").write_text(
        f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2021"\n\n[workspace]\n\n'
        f'[build-dependencies]\nocc-build = {{ path = "{ROOT / "occ-build"}" }}\n')
    arch_list = ", ".join(f'"{a}"' for a in archs)
    (crate / "build.rs").write_text(
        "fn main() {\n    occ_build::Build::new().glob(\"kernels/*.cu\")"
        f".archs([{arch_list}]).compile();\n}}\n")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CARGO_", "OCC_")) or k == "CARGO_HOME"}
    env.update(NVCC=str(NVCC), CARGO_TARGET_DIR=str(WORK / "target"))
    run(["cargo", "build", "--quiet"], cwd=crate, env=env)
    outs = sorted((WORK / "target/debug/build").glob(f"{name}-*/out/occ/manifest.json"),
                  key=lambda p: p.stat().st_mtime)
    if not outs:
        sys.exit(f"cuxray.sh: the {name} build left no manifest")
    return crate, outs[-1].parent


def judged(a):
    """The launch occ judges a kernel x arch at: (block, dynamic smem, occupancy, blocks/SM)."""
    d = a.get("declared")
    if d:
        return d["block_size"], d.get("dynamic_smem", 0), d["occupancy"], d["active_blocks_per_sm"]
    b = a["best"]
    return b["block_size"], 0, b["occupancy"], b["active_blocks_per_sm"]


def relative(path, crate):
    if path is None:
        return None
    p = os.path.normpath(path)
    for root in {str(crate), os.path.realpath(crate)}:
        if p.startswith(root + os.sep):
            return p[len(root) + 1:]
    return p


def cuxray_reports(exe, tc, out, manifest):
    """cuxray's kernels by (cubin, symbol), each run at occ's judged launch."""
    groups = defaultdict(set)
    for k in manifest["kernels"]:
        for a in k["archs"].values():
            block, smem, _, _ = judged(a)
            groups[(a["cubin"], block, smem)].add(k["name"])
    env = dict(os.environ, CUXRAY_NO_FETCH="1", CUXRAY_TOOLCHAIN=str(tc),
               CUXRAY_CACHE=str(WORK / "cuxray-cache"))
    found = {}
    for (cubin, block, smem), names in sorted(groups.items()):
        doc = WORK / "json" / f"{cubin}.{block}.{smem}.json"
        doc.parent.mkdir(exist_ok=True)
        pattern = "^(" + "|".join(re.escape(n) for n in sorted(names)) + ")$"
        cmd = [str(exe), "report", str(out / cubin), "--threads", str(block),
               "--kernel", pattern, "--json", "-o", str(doc)]
        if smem:
            cmd += ["--smem-dynamic", str(smem)]
        run(cmd, env=env, capture_output=True)
        for unit in json.loads(doc.read_text())["units"]:
            for kern in unit["kernels"]:
                if kern["name"] in names:
                    found[(cubin, kern["name"])] = kern
    return found


_CHAINS = {}


def chains(cubin):
    """Per function, per instruction address, its nvdisasm -gi location
    chain, innermost first (`A, line 4 inlined at B, line 13` then `B, line
    13`), and the instruction's text."""
    if cubin in _CHAINS:
        return _CHAINS[cubin]
    text = run([str(NVCC.parent / "nvdisasm"), "-c", "-gi", str(cubin)],
               capture_output=True, text=True).stdout
    out, func, pending, chain = {}, None, [], []
    for raw in text.splitlines():
        m = re.match(r"^\s*\.section\s+\.text\.([^,]+),", raw)
        if m:
            func = out.setdefault(m.group(1), {})
            pending, chain = [], []
            continue
        m = re.match(r'^\s*//## File "([^"]+)", line (\d+)', raw)
        if m and func is not None:
            pending.append((m.group(1), int(m.group(2))))
            continue
        m = re.match(r"^\s*/\*([0-9a-f]+)\*/\s+(.*)$", raw)
        if m and func is not None:
            if pending:
                chain, pending = pending, []
            func[int(m.group(1), 16)] = (chain, m.group(2))
    _CHAINS[cubin] = out
    return out


def width(opcode):
    bytes_ = 4
    for part in opcode.split(".")[1:]:
        bytes_ = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}.get(part, bytes_)
    return bytes_


def spill_lines_by_rule(code, crate):
    """The lines with the most spilled bytes under occ's rule (SpillRefill
    marks, innermost location) and under cuxray's (every STL/LDL, the last
    location of the chain)."""
    inner, outer = defaultdict(int), defaultdict(int)
    for chain, text in code.values():
        if not chain:
            continue
        words = text.split()
        op = words[1] if words and words[0].startswith("@") and len(words) > 1 else (words or [""])[0]
        if not op.startswith(("STL", "LDL")):
            continue
        if "SpillRefill" in text:
            f, ln = chain[0]
            inner[f"{relative(f, crate)}:{ln}"] += width(op)
        f, ln = chain[-1]
        outer[f"{relative(f, crate)}:{ln}"] += width(op)
    best = lambda d: {k for k, v in d.items() if d and v == max(d.values())}
    return best(inner), best(outer), inner


def verified(field, out, crate, a, k, c, ours, theirs):
    """Whether nvdisasm -gi of the cubin reproduces both answers by the
    rule each tool follows, and how."""
    code = chains(out / a["cubin"]).get(k["name"], {})
    if field == "spills most at":
        inner, outer, occ_sites = spill_lines_by_rule(code, crate)
        return ours[field] in occ_sites and theirs[field] in outer, (
            "cuxray counts each spill at the last location nvdisasm -gi gives it, the "
            "outermost caller of inlined code; occ at the innermost, where the code is "
            "(checked: nvdisasm -gi's chains give both answers by these rules)")
    if field == "peak":
        cp = (c.get("pressure") or {}).get("peak") or {}
        chain, _ = code.get(cp.get("addr"), ([], ""))
        if chain:
            f_in, l_in = chain[0]
            f_out, l_out = chain[-1]
            ok = (ours[field].endswith(f" at {relative(f_in, crate)}:{l_in}")
                  and theirs[field].endswith(f" at {relative(f_out, crate)}:{l_out}")
                  and ours[field].split(" at ")[0] == theirs[field].split(" at ")[0])
            return ok, ("same register count at the same instruction: cuxray names the last "
                        "location of its nvdisasm -gi chain (the outermost caller of inlined "
                        "code), occ the innermost (the header's line, where the code is; "
                        "checked on the chain of cuxray's peak address)")
        return (ours[field].split(" at ")[0] == theirs[field].split(" at ")[0],
                "same count; cuxray's first peak instruction has no line, occ takes the first "
                "peak instruction that has one")
    return False, ""


def cell(a, b):
    return str(a) if a == b else f"{a} | {b}"


def compare(name, crate, out, exe, tc):
    manifest = json.loads((out / "manifest.json").read_text())
    cx = cuxray_reports(exe, tc, out, manifest)
    rows, disagreements = [], []
    for k in manifest["kernels"]:
        for arch, a in sorted(k["archs"].items()):
            c = cx.get((a["cubin"], k["name"]))
            label = f"{k['ident']} {arch}"
            if c is None:
                disagreements.append((label, "missing", "cuxray reported no such kernel", ""))
                continue
            block, smem, occ, blocks = judged(a)
            lines = a.get("lines") or {}
            sites = lines.get("spills", [])
            worst = max(sites, key=lambda s: s["stores"] + s["loads"], default=None)
            peak = lines.get("peak_pressure")
            ours = {
                "registers": a["registers"],
                "spill bytes": a["spill_stores"] + a["spill_loads"],
                "occupancy": round(occ * 100, 1),
                "blocks/SM": blocks,
                "spills most at": f"{worst['file']}:{worst['line']}" if worst else "-",
                "peak": f"{peak['registers']} at {peak['file']}:{peak['line']}" if peak else "-",
            }
            co = c.get("occupancy") or {}
            cs = c.get("spills") or {}
            by_line = cs.get("by_line", [])
            cworst = max(by_line, key=lambda s: s["store_bytes"] + s["load_bytes"], default=None)
            cp = (c.get("pressure") or {}).get("peak")
            theirs = {
                "registers": c["resources"]["regs"],
                "spill bytes": cs.get("store_bytes", 0) + cs.get("load_bytes", 0),
                "occupancy": round(co.get("occupancy_pct", -1), 1),
                "blocks/SM": co.get("blocks_per_sm"),
                "spills most at": (f"{relative(cworst['file'], crate)}:{cworst['line']}"
                                   if cworst else "-"),
                "peak": (f"{cp['live_gpr']} at {relative(cp['file'], crate)}:{cp['line']}"
                         if cp else "-"),
            }
            rows.append([label, str(block)] + [cell(ours[f], theirs[f]) for f in ours])
            for field in ours:
                if ours[field] != theirs[field]:
                    why = explain(field, a)
                    if field in ("spills most at", "peak"):
                        ok, rule = verified(field, out, crate, a, k, c, ours, theirs)
                        why = rule if ok else "not explained (nvdisasm -gi does not reproduce it)"
                    disagreements.append((label, field,
                                          f"occ {ours[field]}, cuxray {theirs[field]}", why))
    return manifest, rows, disagreements


def explain(field, a):
    """Why a number differs, as far as the manifest says."""
    limiters = (a.get("declared") or a["best"])["limiters"]
    if field in ("occupancy", "blocks/SM") and "barriers" in limiters:
        return (f"named barriers: ptxas reports {a['barriers']} per block, and cuda_occupancy.h "
                "(13.5, sm_90 and newer) fits only as many blocks as the SM's barriers allow; "
                "cuxray leaves that limit out (occ's numbers are the header's: the oracle test)")
    if field == "spill bytes":
        return ("not explained (cuxray counts every STL/LDL as a spill, occ ptxas's bytes, "
                "which are nvdisasm's SpillRefill instructions)")
    return "not explained"


HEAD = ["kernel arch", "block", "registers", "spill B", "occupancy %", "blocks/SM",
        "spills most at", "peak pressure"]


def short(text):
    """Toolkit headers as `<cuda>/include/...`."""
    return text.replace(str(NVCC.parent.parent) + "/", "<cuda>/")


def table(rows):
    all_rows = [HEAD] + [[short(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in all_rows) for i in range(len(HEAD))]
    lines = []
    for n, r in enumerate(all_rows):
        lines.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if n == 0:
            lines.append("-" * (sum(widths) + 2 * (len(widths) - 1)))
    return "\n".join(lines) + "\n"


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    exe = venv()
    tc = toolchain()
    print("# cells: `occ | cuxray` where they differ, one value where they agree")
    total = defaultdict(int)
    for name, files, archs in CORPORA[:1] if SMOKE else CORPORA:
        crate, out = occ_build(name, files, archs)
        manifest, rows, disagreements = compare(name, crate, out, exe, tc)
        print(f"\n## {name}: {len(rows)} kernel x archs ({', '.join(archs)})\n")
        # Agreement per column (a cell holds `occ | cuxray` where they differ).
        for i, field in enumerate(HEAD[2:], start=2):
            same = sum(1 for r in rows if " | " not in r[i])
            print(f"- {field}: {same} of {len(rows)} agree")
        text = table(rows)
        (WORK / f"{name}.txt").write_text(text)
        if len(rows) <= 40:
            print("\n" + text, end="")
        else:
            print(f"\n(first 20 rows; all {len(rows)} in {WORK / (name + '.txt')})\n")
            print("\n".join(text.splitlines()[:22]))
        by_kind = defaultdict(list)
        for d in disagreements:
            by_kind[(d[1], d[3])].append(d)
        print(f"\n{len(disagreements)} disagreements"
              f"{':' if disagreements else ''}")
        for (field, why), ds in sorted(by_kind.items()):
            print(f"- {field} ({len(ds)} kernel x archs): {why}")
            for label, _, what, _ in ds[:5]:
                print(f"    {label}: {short(what)}")
            if len(ds) > 5:
                print(f"    ... and {len(ds) - 5} more")
        total["rows"] += len(rows)
        total["disagreements"] += len(disagreements)
        total["unexplained"] += sum(1 for d in disagreements if "not explained" in d[3])
    print(f"\n# {total['rows']} kernel x archs, {total['disagreements']} disagreements, "
          f"{total['unexplained']} unexplained")
    return 1 if total["unexplained"] else 0


if __name__ == "__main__":
    sys.exit(main())
