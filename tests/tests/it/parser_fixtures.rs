//! The ptxas log parser against real captured logs (tests/fixtures, made by
//! tests/fixtures/regen.sh from tests/fixtures/src/*.cu).
//!
//! nvcc 13.5 logs are checked against `cuobjdump --dump-resource-usage` of the binary
//! the same run produced; logs of older ptxas against facts that follow from the
//! source.

use std::collections::{BTreeMap, BTreeSet};

use crate::parser_support::{fixture, parse_res_usage, sm_number};
use occ_model::compiler::ptxas::{parse_log, KernelRecord, Log, Severity};

/// Parses `<stem>.log` and checks every kernel against `<stem>.res-usage.txt`.
fn check_against_cuobjdump(stem: &str) -> Log {
    let log = parse_log(&fixture(&format!("{stem}.log"))).expect("fixture parses");
    let (commons, funcs) = parse_res_usage(&fixture(&format!("{stem}.res-usage.txt")));
    assert!(!log.kernels.is_empty(), "{stem}: no kernels");
    assert!(!funcs.is_empty(), "{stem}: no cuobjdump functions");
    // A bare cubin's dump has no `arch =` line; its arch is the one of the log.
    let log_archs: BTreeSet<&str> = log
        .kernels
        .iter()
        .filter_map(|k| k.arch.as_deref())
        .collect();
    let res_arch = |a: &Option<String>| -> String {
        match a {
            Some(a) => a.clone(),
            None => {
                assert_eq!(
                    log_archs.len(),
                    1,
                    "{stem}: bare cubin but several archs in the log"
                );
                log_archs
                    .iter()
                    .next()
                    .map(|s| s.to_string())
                    .unwrap_or_default()
            }
        }
    };
    for k in &log.kernels {
        let arch = k.arch.clone().expect("13.5 logs name the arch");
        let r = funcs
            .iter()
            .find(|r| r.name == k.name && res_arch(&r.arch) == arch)
            .unwrap_or_else(|| panic!("{stem}: {} {arch} not in cuobjdump output", k.name));
        let what = format!("{stem}: {} {arch}", k.name);
        assert_eq!(k.registers, Some(r.reg), "{what}: registers");
        match r.stack {
            // The entry's own frame, or with callees (the -G anon_kernel calls an
            // out-of-line atomicAdd with a 24-byte frame) the cumulative stack.
            Some(stack) => assert_eq!(k.stack_size(), stack, "{what}: stack"),
            None => assert!(
                k.warnings()
                    .any(|w| w.message.contains("cannot be statically determined")),
                "{what}: cuobjdump says STACK:UNKNOWN but no stack warning is attached"
            ),
        }
        if sm_number(&arch) >= 90 {
            let extra = r.shared - k.static_smem;
            assert!(
                extra == 0 || extra == 1024,
                "{what}: SHARED {} vs smem {}",
                r.shared,
                k.static_smem
            );
            if k.static_smem > 0 {
                assert_eq!(extra, 1024, "{what}: sm_90+ adds 1 KB to static smem");
            }
        } else {
            assert_eq!(k.static_smem, r.shared, "{what}: static smem");
        }
        if sm_number(&arch) < 90 || k.linked {
            assert_eq!(k.cmem.get(&0), r.constant.get(&0), "{what}: cmem[0]");
        } else {
            assert!(k.cmem.is_empty(), "{what}: ptxas prints no cmem for sm_90+");
        }
        assert_eq!(r.local, 0, "{what}: cuobjdump LOCAL");
    }
    // Every function in the binary is a kernel or a non-entry function of the log.
    for r in &funcs {
        let arch = res_arch(&r.arch);
        let known = log
            .kernels
            .iter()
            .any(|k| k.name == r.name && k.arch.as_deref() == Some(&arch))
            || log.functions.iter().any(|f| f.name == r.name);
        assert!(
            known,
            "{stem}: cuobjdump lists {} {arch}, the parse does not",
            r.name
        );
    }
    // Module global and constant memory, for runs that compiled an entry.
    for m in log.modules.iter().filter(|m| m.arch.is_some()) {
        let arch = m.arch.clone().unwrap_or_default();
        let c = commons
            .iter()
            .find(|c| res_arch(&c.arch) == arch)
            .unwrap_or_else(|| panic!("{stem}: no Common section for {arch}"));
        if !log.kernels.iter().any(|k| k.linked) {
            assert_eq!(m.gmem, c.global, "{stem}: {arch} gmem");
        }
        if sm_number(&arch) < 90 {
            let user: BTreeMap<u32, u64> = c
                .constant
                .iter()
                .filter(|(b, _)| **b != 0)
                .map(|(b, v)| (*b, *v))
                .collect();
            assert_eq!(m.cmem, user, "{stem}: {arch} module cmem");
        } else {
            assert!(m.cmem.is_empty(), "{stem}: {arch} module cmem");
        }
    }
    log
}

fn kernel<'a>(log: &'a Log, name: &str) -> &'a KernelRecord {
    log.kernels
        .iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("no kernel {name}"))
}

#[test]
fn nvcc_13_5_one_arch_matches_cuobjdump() {
    for arch in ["sm_75", "sm_80", "sm_90"] {
        let log = check_against_cuobjdump(&format!("ptxas-13.5-{arch}"));
        assert!(log.kernels.iter().all(|k| k.arch.as_deref() == Some(arch)));
        assert!(log.kernels.iter().all(|k| k.barriers.is_some()));
        // fib and helper are non-entry functions, never kernels.
        let funcs: BTreeSet<&str> = log.functions.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(funcs, BTreeSet::from(["_Z3fibi", "_Z6helperfi"]));
        assert!(log
            .functions
            .iter()
            .all(|f| f.arch.as_deref() == Some(arch)));
    }
}

#[test]
fn threads_multi_arch_matches_cuobjdump() {
    let log = check_against_cuobjdump("ptxas-13.5-threads");
    let archs: BTreeSet<&str> = log
        .kernels
        .iter()
        .filter_map(|k| k.arch.as_deref())
        .collect();
    assert_eq!(archs, BTreeSet::from(["sm_80", "sm_90a", "sm_100"]));
    let per_arch = log.kernels.len() / 3;
    for a in archs {
        assert_eq!(
            log.kernels
                .iter()
                .filter(|k| k.arch.as_deref() == Some(a))
                .count(),
            per_arch
        );
    }
    assert_eq!(log.modules.len(), 3);
}

#[test]
fn device_debug_log_matches_cuobjdump() {
    let log = check_against_cuobjdump("ptxas-13.5-G-sm_90");
    // With -G the non-entry functions come before the entries that call them, with no
    // entry to attach to: helper and fib come before the first entry of the run.
    let first_kernel = log.kernels.iter().map(|k| k.line).min().unwrap_or(0);
    for name in ["_Z6helperfi", "_Z3fibi"] {
        let f = log
            .functions
            .iter()
            .find(|f| f.name == name)
            .expect("non-entry function");
        assert!(f.line < first_kernel, "{name}");
    }
    assert!(
        log.functions.len() > 2,
        "-G keeps atomicAdd and friends out of line"
    );
    assert!(log
        .functions
        .iter()
        .all(|f| f.arch.as_deref() == Some("sm_90")));
}

#[test]
fn rdc_prefers_nvlink_figures() {
    let log = check_against_cuobjdump("ptxas-13.5-rdc");
    // cuobjdump agreed with the linked figures; ptxas alone said otherwise.
    let text = fixture("ptxas-13.5-rdc.log");
    let ptxas_only: String = text
        .lines()
        .filter(|l| !l.starts_with("nvlink"))
        .map(|l| format!("{l}\n"))
        .collect();
    let unlinked = parse_log(&ptxas_only).expect("parses");
    for arch in ["sm_80", "sm_90"] {
        let k = log
            .kernels
            .iter()
            .find(|k| k.name == "_Z9calls_farPfi" && k.arch.as_deref() == Some(arch))
            .expect("calls_far");
        assert!(k.linked);
        let before = unlinked
            .kernels
            .iter()
            .find(|u| u.name == k.name && u.arch == k.arch)
            .expect("calls_far before linking");
        assert!(!before.linked);
        assert!(
            k.registers
                .zip(before.registers)
                .is_some_and(|(a, b)| a > b),
            "{arch}: link adds the callee's registers"
        );
    }
    assert_eq!(log.linked.len(), 4);
    assert!(log.functions.iter().any(|f| f.name == "_Z10far_helperfi"));
}

#[test]
fn an_rdc_log_cut_after_nvlinks_function_properties_line_counts_no_registers() {
    // The real -rdc log, cut right after nvlink's last `Function properties
    // for` line: its `used N registers` line never came.
    let text = fixture("ptxas-13.5-rdc.log");
    let cut = "nvlink info    : Function properties for 'local_only': (target: sm_90)";
    let end = text.find(cut).expect("the line is in the fixture") + cut.len();
    let log = parse_log(&text[..end]).expect("parses");
    let open = log.linked.last().expect("the cut record");
    assert_eq!((open.name.as_str(), open.registers), ("local_only", None));
    let k = log
        .kernels
        .iter()
        .find(|k| k.name == "local_only" && k.arch.as_deref() == Some("sm_90"))
        .expect("local_only for sm_90");
    // Not 0, and not ptxas's 8 either: the link's count is unknown.
    assert_eq!(k.registers, None, "{k:?}");
    // The records before the cut still apply.
    let far = log
        .kernels
        .iter()
        .find(|k| k.name == "_Z9calls_farPfi" && k.arch.as_deref() == Some("sm_90"))
        .expect("calls_far for sm_90");
    assert_eq!((far.registers, far.linked), (Some(67), true));
}

#[test]
fn warnings_stay_with_their_kernel() {
    let log = check_against_cuobjdump("ptxas-13.5-warnings-sm_86");
    let spill = kernel(&log, "_Z12spill_kernelPKfPfi");
    // --warn-on-spills repeats the spill figures of the resource lines.
    let w3 = spill
        .warnings()
        .find(|w| w.message.starts_with("Registers are spilled"))
        .expect("spill warning attached");
    assert!(w3
        .message
        .contains(&format!("{} bytes spill stores", spill.spill_stores)));
    assert!(w3
        .message
        .contains(&format!("{} bytes spill loads", spill.spill_loads)));
    assert!(spill
        .warnings()
        .any(|w| w.message.contains(".minnctapersm will be ignored")));
    // -maxrregcount=24: one `Overriding maximum register limit` note per capped kernel.
    let capped: Vec<&KernelRecord> = log
        .kernels
        .iter()
        .filter(|k| {
            k.diagnostics.iter().any(|d| {
                d.severity == Severity::Info && d.message.contains("with  24 of maxrregcount")
            })
        })
        .collect();
    assert!(capped.len() >= 10, "{} capped kernels", capped.len());
    assert!(capped.iter().all(|k| k.registers.is_some_and(|r| r <= 24)));
    // A warning about a non-entry function stays free-floating.
    let fib = log
        .diagnostics
        .iter()
        .find(|d| d.symbol.as_deref() == Some("_Z3fibi"))
        .expect("fib spill warning");
    assert!(log.kernels.iter().all(|k| !k.diagnostics.contains(fib)));
    let recursive = kernel(&log, "_Z15calls_recursivePi");
    assert!(recursive
        .warnings()
        .any(|w| w.message.contains("cannot be statically determined")));
}

/// Names of the 13 kernels of tests/fixtures/src/kernels.cu.
const KERNELS: [&str; 13] = [
    "saxpy",
    "use_constant",
    "_ZN2ns5inner5tkernIdLi128EEEvPT_PKS2_",
    "_ZN2ns5inner5tkernIfLi64EEEvPT_PKS2_",
    "_Z11smem_staticPf",
    "_Z8dyn_smemPfi",
    "_Z9lb_kernelPf",
    "_Z12spill_kernelPKfPfi",
    "_Z12calls_helperPfi",
    "_Z15calls_recursivePi",
    "_Z10use_printfi",
    "_ZN40_GLOBAL__N__d3eb3599_10_kernels_cu_saxpy11anon_kernelEPi",
    "_Z14cluster_kernelPi",
];

/// Facts that follow from kernels.cu, whatever the ptxas version.
fn check_source_facts(file: &str, arch: &str) -> Log {
    let log = parse_log(&fixture(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let names: BTreeSet<&str> = log.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, BTreeSet::from(KERNELS), "{file}");
    assert_eq!(log.kernels.len(), KERNELS.len(), "{file}");
    assert!(
        log.kernels.iter().all(|k| k.arch.as_deref() == Some(arch)),
        "{file}"
    );
    // Static shared memory: float s[256], double s[128], float s[64], int s[128].
    let smem = |n: &str| kernel(&log, n).static_smem;
    assert_eq!(smem("_Z11smem_staticPf"), 256 * 4, "{file}");
    assert_eq!(
        smem("_ZN2ns5inner5tkernIdLi128EEEvPT_PKS2_"),
        128 * 8,
        "{file}"
    );
    assert_eq!(
        smem("_ZN2ns5inner5tkernIfLi64EEEvPT_PKS2_"),
        64 * 4,
        "{file}"
    );
    assert_eq!(smem("_Z14cluster_kernelPi"), 128 * 4, "{file}");
    assert_eq!(
        smem("_Z8dyn_smemPfi"),
        0,
        "{file}: dynamic smem is not in the log"
    );
    assert_eq!(smem("saxpy"), 0, "{file}");
    // __launch_bounds__(1024, 2) caps registers at 65536 / 2048 = 32: it spills.
    let spill = kernel(&log, "_Z12spill_kernelPKfPfi");
    assert!(
        spill.registers.is_some_and(|r| r <= 32) && spill.spill_stores > 0 && spill.spill_loads > 0,
        "{file}"
    );
    assert!(
        spill.stack_frame > 0,
        "{file}: spills live in the stack frame"
    );
    assert!(
        kernel(&log, "_Z9lb_kernelPf")
            .registers
            .is_some_and(|r| r <= 128),
        "{file}"
    );
    // printf needs a stack buffer for its two ints.
    assert!(kernel(&log, "_Z10use_printfi").stack_frame >= 8, "{file}");
    // Recursion and __noinline__ give non-entry functions, never kernels.
    let funcs: BTreeSet<&str> = log.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(funcs, BTreeSet::from(["_Z3fibi", "_Z6helperfi"]), "{file}");
    assert_eq!(
        kernel(&log, "_Z15calls_recursivePi").cumulative_stack,
        None,
        "{file}"
    );
    // One module: float table[1000] + int counter + the printf format string (18 bytes)
    // and __constant__ float coeffs[8] in bank 3.
    assert_eq!(log.modules.len(), 1, "{file}");
    assert_eq!(
        log.modules[0].gmem,
        1000 * 4 + 4 + "value %d from %d\n".len() as u64 + 1,
        "{file}"
    );
    assert_eq!(log.modules[0].cmem.get(&3), Some(&32), "{file}");
    assert!(
        log.kernels.iter().all(|k| k.cmem.contains_key(&0)),
        "{file}: cmem[0] below sm_90"
    );
    assert!(log.errors().next().is_none(), "{file}");
    log
}

#[test]
fn ptxas_12_9_logs() {
    for arch in ["sm_52", "sm_61", "sm_70"] {
        let file = format!("ptxas-12.9-{arch}.log");
        let log = check_source_facts(&file, arch);
        // 12.9 prints barriers: kernels with __syncthreads use one.
        for n in [
            "_Z11smem_staticPf",
            "_Z8dyn_smemPfi",
            "_ZN2ns5inner5tkernIfLi64EEEvPT_PKS2_",
        ] {
            assert_eq!(kernel(&log, n).barriers, Some(1), "{file}: {n}");
        }
        assert_eq!(kernel(&log, "saxpy").barriers, Some(0), "{file}");
    }
}

#[test]
fn ptxas_11_8_logs() {
    for arch in ["sm_52", "sm_70"] {
        let file = format!("ptxas-11.8-{arch}.log");
        let log = check_source_facts(&file, arch);
        assert!(
            log.kernels.iter().all(|k| k.barriers.is_none()),
            "{file}: 11.8 prints no barriers"
        );
        // 11.8 warns about recursion (12.9 does not); the warning stays with its kernel.
        let recursive = kernel(&log, "_Z15calls_recursivePi");
        assert!(
            recursive
                .warnings()
                .any(|w| w.message.contains("cannot be statically determined")),
            "{file}"
        );
    }
}
