//! The oracle: occ-build's occupancy model against NVIDIA's `cuda_occupancy.h`.
//!
//! A small C++ harness (`tests/oracle/harness.cpp`) is compiled against the
//! installed header (CUDA_HOME, NVCC, or `<workspace>/.cuda/cu13/...` as
//! `scripts/cuda-toolkit` installs it) and run in two modes:
//!
//! - `sweep`: every arch × registers 0..=256 × block sizes 1..=1024 at three
//!   shared-memory points, plus `cudaOccMaxPotentialOccupancyBlockSize` for
//!   each (arch, smem, registers);
//! - `random`: deterministic random full inputs (carveouts, cache
//!   preferences, barriers, dynamic smem and its attribute, launch bounds,
//!   partitioned caching, virtual resources), each also run through the block
//!   size search (constant and per-thread dynamic smem) and
//!   `cudaOccAvailableDynamicSMemPerBlock`.
//!
//! The device table is written from occ-build's own `arch` table, plus 10.1
//! with the 11.0 figures (occ maps `sm_101` to 11.0). Every field of every
//! answer must match; a failure prints the count and the first mismatches.

use occ_model::model::arch::{self, Arch};
use occ_model::model::occupancy::{
    occupancy, BlockLaunch, CachePref, KernelResources, OccupancyError, PartitionedGc,
};
use occ_model::model::suggest::{
    available_dynamic_smem, best_block_size, DynamicSmem, TuneRequest,
};
use std::fmt::Write as _;
use std::io::{BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

const RANDOM_CASES: usize = 1_200_000;
const SMEM_POINTS: [(u32, u32); 3] = [(0, 0), (4000, 0), (12345, 20000)];
const INT_MAX: i32 = i32::MAX;

/// Compiles the harness once per process.
fn harness() -> &'static Path {
    occ_tests::oracle::harness(Path::new(env!("CARGO_TARGET_TMPDIR")))
}

/// The devices the harness sees: every arch, then 10.1 with 11.0's figures.
fn devices() -> Vec<(u32, u32, &'static Arch)> {
    let mut v: Vec<_> = arch::all().iter().map(|a| (a.major, a.minor, a)).collect();
    v.push((10, 1, arch::lookup("sm_110").expect("sm_110 is known")));
    v
}

fn device_table() -> String {
    occ_tests::oracle::device_table(&devices())
}

fn run_harness(mode: &str, input: &Path) -> std::process::Child {
    let stdin = std::fs::File::open(input).expect("open harness input");
    Command::new(harness())
        .arg(mode)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the oracle harness")
}

struct Mismatches {
    count: u64,
    first: Vec<String>,
}

impl Mismatches {
    fn new() -> Self {
        Mismatches {
            count: 0,
            first: Vec::new(),
        }
    }

    fn add(&mut self, msg: impl FnOnce() -> String) {
        self.count += 1;
        if self.first.len() < 10 {
            self.first.push(msg());
        }
    }

    fn check(self, what: &str, total: u64) {
        assert!(
            self.count == 0,
            "{what}: {} mismatches out of {total}; first ones:\n{}",
            self.count,
            self.first.join("\n")
        );
        eprintln!("{what}: {total} comparisons, 0 mismatches");
    }
}

fn u16_limit(v: Option<u32>) -> u16 {
    match v {
        None => 0xFFFF,
        Some(v) => v.min(0xFFFE) as u16,
    }
}

fn i32_limit(v: Option<u32>) -> i32 {
    v.map_or(INT_MAX, |v| v as i32)
}

#[test]
fn sweep_matches_header() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let input = dir.join("occ-oracle-sweep.txt");
    let mut text = device_table();
    writeln!(text, "{}", SMEM_POINTS.len()).expect("write");
    for (s, d) in SMEM_POINTS {
        writeln!(text, "{s} {d}").expect("write");
    }
    std::fs::write(&input, text).expect("write sweep input");
    let mut child = run_harness("sweep", &input);
    let mut out = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));

    let mut bad = Mismatches::new();
    let mut total = 0u64;
    let mut rec = [0u8; 24 * 1024];
    let mut best_rec = [0u8; 4];
    for (major, minor, a) in devices() {
        for (stat, dynamic) in SMEM_POINTS {
            for regs in 0..=256u32 {
                out.read_exact(&mut rec).expect("sweep record");
                let kernel = KernelResources {
                    registers: regs,
                    static_smem: stat,
                    ..Default::default()
                };
                for b in 1..=1024u32 {
                    total += 1;
                    let r = &rec[(b as usize - 1) * 24..b as usize * 24];
                    let u16at = |i: usize| u16::from_le_bytes([r[i], r[i + 1]]);
                    let u32at = |i: usize| u32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
                    let launch = BlockLaunch::new(b).with_dynamic_smem(dynamic);
                    let ours = match occupancy(a, &kernel, &launch) {
                        Ok(o) => o,
                        Err(e) => {
                            bad.add(|| format!("{major}.{minor} regs {regs} block {b} smem {stat}+{dynamic}: ours error {e}, header {}", u16at(0)));
                            continue;
                        }
                    };
                    let l = &ours.limits;
                    let mine: [u32; 11] = [
                        ours.active_blocks_per_sm,
                        u32::from(ours.limiters.bits()),
                        ours.partitioned_gc as u32,
                        u32::from(u16_limit(Some(l.warps))),
                        u32::from(u16_limit(l.registers)),
                        u32::from(u16_limit(l.shared_memory)),
                        u32::from(u16_limit(Some(l.blocks))),
                        u32::from(u16_limit(l.barriers)),
                        u32::from(u16_limit(l.virtual_resources)),
                        ours.allocated_registers_per_block,
                        ours.allocated_smem_per_block,
                    ];
                    let theirs: [u32; 11] = [
                        u32::from(u16at(0)),
                        u32::from(r[2]),
                        u32::from(r[3]),
                        u32::from(u16at(4)),
                        u32::from(u16at(6)),
                        u32::from(u16at(8)),
                        u32::from(u16at(10)),
                        u32::from(u16at(12)),
                        u32::from(u16at(14)),
                        u32at(16),
                        u32at(20),
                    ];
                    if mine != theirs {
                        bad.add(|| {
                            format!(
                                "{major}.{minor} regs {regs} block {b} smem {stat}+{dynamic}: \
                                 [active flags gc warps regs smem blocks bars virt allocR allocS] \
                                 ours {mine:?} header {theirs:?}"
                            )
                        });
                    }
                }
                out.read_exact(&mut best_rec).expect("best record");
                total += 1;
                let hb = u16::from_le_bytes([best_rec[0], best_rec[1]]);
                let hn = u16::from_le_bytes([best_rec[2], best_rec[3]]);
                let req = TuneRequest {
                    dynamic_smem: DynamicSmem::Fixed(dynamic),
                    ..Default::default()
                };
                let ours = match best_block_size(a, &kernel, &req) {
                    Ok(Some(bb)) => (bb.block_size as u16, bb.active_blocks_per_sm() as u16),
                    Ok(None) => (0, 0),
                    Err(_) => (0xFFFF, 0xFFFF),
                };
                if ours != (hb, hn) {
                    bad.add(|| {
                        format!(
                            "{major}.{minor} regs {regs} smem {stat}+{dynamic}: best block \
                             ours {ours:?} header {:?}",
                            (hb, hn)
                        )
                    });
                }
            }
        }
    }
    let mut rest = Vec::new();
    out.read_to_end(&mut rest).expect("read harness output");
    let status = child.wait().expect("wait for harness");
    assert!(status.success(), "harness sweep failed: {status}");
    assert!(
        rest.is_empty(),
        "harness wrote {} unexpected bytes",
        rest.len()
    );
    bad.check("sweep", total);
}

/// splitmix64: small, deterministic, good enough for test inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in lo..=hi.
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() % (u64::from(hi - lo) + 1)) as u32
    }

    fn pct(&mut self) -> u32 {
        self.range(0, 99)
    }
}

#[derive(Debug, Clone, Copy)]
struct Case {
    arch: u32,
    regs: u32,
    static_smem: u32,
    max_dyn: u32,
    barriers: u32,
    fn_max_threads: u32,
    virtual_res: u32,
    block_size: u32,
    dyn_smem: u32,
    carveout: i32,
    cache_pref: u32,
    gc: u32,
    tune_kind: u32,
    per_thread: u32,
    fixed: u32,
    num_blocks: u32,
}

impl Case {
    fn gen(rng: &mut Rng, devs: &[(u32, u32, &'static Arch)]) -> Case {
        let arch = rng.range(0, devs.len() as u32 - 1);
        let a = devs[arch as usize].2;
        let optin = a.smem_per_block_optin;
        let regs = match rng.pct() {
            0..=4 => 0,
            5..=9 => rng.range(248, 262),
            10..=59 => rng.range(1, 64),
            _ => rng.range(1, 255),
        };
        let static_smem = match rng.pct() {
            0..=29 => 0,
            30..=59 => rng.range(0, 4096),
            _ => rng.range(0, optin),
        };
        let allowed = optin - static_smem;
        let max_dyn = if rng.pct() < 50 {
            allowed
        } else {
            rng.range(0, allowed)
        };
        let dyn_smem = match rng.pct() {
            0..=29 => 0,
            30..=79 => rng.range(0, allowed),
            _ => rng.range(0, max_dyn),
        };
        let barriers = match rng.pct() {
            0..=9 => 0,
            10..=69 => 1,
            _ => rng.range(2, 16),
        };
        let fn_max_threads = if rng.pct() < 60 {
            1024
        } else {
            rng.range(1, 1024)
        };
        let block_size = if rng.pct() < 30 && fn_max_threads >= 32 {
            rng.range(1, fn_max_threads / 32) * 32
        } else {
            rng.range(1, fn_max_threads)
        };
        let virtual_res = if rng.pct() < 70 { 0 } else { rng.range(1, 140) };
        let carveout = match rng.pct() {
            0..=38 => -1,
            39 => rng.range(101, 127) as i32,
            _ => rng.range(0, 100) as i32,
        };
        let tune_kind = rng.range(0, 1);
        let per_thread = rng.range(0, 300);
        let fixed = if rng.pct() < 50 {
            0
        } else {
            rng.range(0, allowed / 2)
        };
        Case {
            arch,
            regs,
            static_smem,
            max_dyn,
            barriers,
            fn_max_threads,
            virtual_res,
            block_size,
            dyn_smem,
            carveout,
            cache_pref: rng.range(0, 3),
            gc: rng.range(0, 2),
            tune_kind,
            per_thread,
            fixed,
            num_blocks: rng.range(1, 40),
        }
    }

    fn to_bytes(self, out: &mut Vec<u8>) {
        for v in [
            self.arch as i32,
            self.regs as i32,
            self.static_smem as i32,
            self.max_dyn as i32,
            self.barriers as i32,
            self.fn_max_threads as i32,
            self.virtual_res as i32,
            self.block_size as i32,
            self.dyn_smem as i32,
            self.carveout,
            self.cache_pref as i32,
            self.gc as i32,
            self.tune_kind as i32,
            self.per_thread as i32,
            self.fixed as i32,
            self.num_blocks as i32,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

#[test]
fn random_inputs_match_header() {
    let devs = devices();
    let mut rng = Rng(0x6f63_635f_6f72_6163);
    let cases: Vec<Case> = (0..RANDOM_CASES)
        .map(|_| Case::gen(&mut rng, &devs))
        .collect();
    let mut input = device_table().into_bytes();
    input.reserve(cases.len() * 64);
    for c in &cases {
        c.to_bytes(&mut input);
    }
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("occ-oracle-random.bin");
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(&input))
        .expect("write random input");
    drop(input);
    let mut child = run_harness("random", &path);
    let mut out = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));

    let mut bad = Mismatches::new();
    let mut rec = [0u8; 68];
    let mut invalid_carveouts = 0u32;
    for c in &cases {
        out.read_exact(&mut rec).expect("result record");
        let h: [i32; 17] = std::array::from_fn(|i| {
            i32::from_le_bytes(rec[i * 4..i * 4 + 4].try_into().expect("4 bytes"))
        });
        let (major, minor, a) = devs[c.arch as usize];
        let kernel = KernelResources {
            registers: c.regs,
            static_smem: c.static_smem,
            barriers: c.barriers,
            max_threads_per_block: Some(c.fn_max_threads),
            virtual_resources: c.virtual_res,
            max_dynamic_smem: Some(c.max_dyn),
        };
        let cache_pref = [
            CachePref::None,
            CachePref::Shared,
            CachePref::L1,
            CachePref::Equal,
        ][c.cache_pref as usize];
        let gc = [
            PartitionedGc::Off,
            PartitionedGc::On,
            PartitionedGc::OnStrict,
        ][c.gc as usize];
        let carveout = (c.carveout >= 0).then_some(c.carveout as u8);
        let launch = BlockLaunch {
            block_size: c.block_size,
            dynamic_smem: c.dyn_smem,
            carveout,
            cache_pref,
            partitioned_gc: gc,
        };
        let ctx = || format!("case {c:?} on {major}.{minor}");

        if c.carveout > 100 {
            // occ rejects these everywhere; the header from 7.0 on.
            invalid_carveouts += 1;
            if !matches!(
                occupancy(a, &kernel, &launch),
                Err(OccupancyError::Carveout(_))
            ) {
                bad.add(|| format!("{}: carveout above 100 accepted", ctx()));
            }
            if major >= 7 && (h[0] != 1 || h[12] != 1 || h[15] != 1) {
                bad.add(|| format!("{}: header accepted carveout {}: {h:?}", ctx(), c.carveout));
            }
            continue;
        }

        // cudaOccMaxActiveBlocksPerMultiprocessor
        match occupancy(a, &kernel, &launch) {
            Ok(o) => {
                let l = &o.limits;
                let mine = [
                    0,
                    o.active_blocks_per_sm as i32,
                    i32::from(o.limiters.bits()),
                    l.warps as i32,
                    i32_limit(l.registers),
                    i32_limit(l.shared_memory),
                    l.blocks as i32,
                    i32_limit(l.barriers),
                    i32_limit(l.virtual_resources),
                    o.allocated_registers_per_block as i32,
                    o.allocated_smem_per_block as i32,
                    o.partitioned_gc as i32,
                ];
                if mine[..] != h[..12] {
                    bad.add(|| {
                        format!(
                            "{}: [status active flags warps regs smem blocks bars virt allocR \
                             allocS gc] ours {mine:?} header {:?}",
                            ctx(),
                            &h[..12]
                        )
                    });
                }
            }
            Err(e) => bad.add(|| format!("{}: ours error `{e}`, header {:?}", ctx(), &h[..12])),
        }

        // cudaOccMaxPotentialOccupancyBlockSize(VariableSMem)
        let req = TuneRequest {
            dynamic_smem: if c.tune_kind == 0 {
                DynamicSmem::Fixed(c.fixed)
            } else {
                DynamicSmem::PerThread {
                    per_thread: c.per_thread,
                    fixed: c.fixed,
                }
            },
            carveout,
            cache_pref,
            partitioned_gc: gc,
            ..Default::default()
        };
        let best = match best_block_size(a, &kernel, &req) {
            Ok(Some(b)) => [0, b.block_size as i32, b.active_blocks_per_sm() as i32],
            Ok(None) => [0, 0, 0],
            Err(_) => [-1, 0, 0],
        };
        if best[..] != h[12..15] {
            bad.add(|| {
                format!(
                    "{}: best block [status block blocks] ours {best:?} header {:?}",
                    ctx(),
                    &h[12..15]
                )
            });
        }

        // cudaOccAvailableDynamicSMemPerBlock
        let avail = match available_dynamic_smem(a, &kernel, &launch, c.num_blocks) {
            Ok(v) => [0, v as i32],
            Err(OccupancyError::NumBlocks { .. }) => [1, h[16]],
            Err(_) => [-1, 0],
        };
        if avail[..] != h[15..17] {
            bad.add(|| {
                format!(
                    "{}: available dynamic smem [status bytes] ours {avail:?} header {:?}",
                    ctx(),
                    &h[15..17]
                )
            });
        }
    }
    let status = child.wait().expect("wait for harness");
    assert!(status.success(), "harness random failed: {status}");
    assert!(
        invalid_carveouts > 1000,
        "too few invalid carveouts generated"
    );
    bad.check("random", cases.len() as u64 * 3);
}

/// Times the full sweep (every arch × registers 0..=255 × block sizes
/// 1..=1024, no shared memory) in the C++ harness and in occ-build, side by
/// side, and checks that both computed the same checksum. Run with
/// `cargo test -p occ-tests --release --test oracle -- --ignored --nocapture bench_side_by_side`.
#[test]
#[ignore = "timing run, not a check; see the doc comment"]
fn bench_side_by_side() {
    let archs = arch::all();
    let mut table = format!("{}\n", archs.len());
    for line in device_table().lines().skip(1).take(archs.len()) {
        table += line;
        table.push('\n');
    }
    let input = Path::new(env!("CARGO_TARGET_TMPDIR")).join("occ-oracle-bench.txt");
    std::fs::write(&input, table).expect("write bench input");
    let out = run_harness("bench", &input)
        .wait_with_output()
        .expect("run harness bench");
    let text = String::from_utf8_lossy(&out.stdout);
    let nums: Vec<u64> = text
        .split_whitespace()
        .map(|w| w.parse().expect("harness bench prints numbers"))
        .collect();
    let (calls, cpp_ns, cpp_sum) = (nums[0], nums[1], nums[2]);

    let start = std::time::Instant::now();
    let mut sum = 0u64;
    let mut n = 0u64;
    for a in archs {
        for registers in 0..=255 {
            let kernel = KernelResources {
                registers,
                ..Default::default()
            };
            for block in 1..=1024 {
                let o = occupancy(a, std::hint::black_box(&kernel), &BlockLaunch::new(block))
                    .expect("valid sweep input");
                sum += u64::from(o.active_blocks_per_sm) + u64::from(o.limiters.bits());
                n += 1;
            }
        }
    }
    let rust_ns = start.elapsed().as_nanos() as u64;
    eprintln!(
        "full sweep, {calls} calls: cuda_occupancy.h (g++ -O2) {:.1} ms = {:.1} ns/call; \
         occ-build {:.1} ms = {:.1} ns/call",
        cpp_ns as f64 / 1e6,
        cpp_ns as f64 / calls as f64,
        rust_ns as f64 / 1e6,
        rust_ns as f64 / n as f64
    );
    assert_eq!(n, calls);
    assert_eq!(sum, cpp_sum, "checksums differ");
}

/// A kernel built by nvcc for a declared launch (a fixed
/// `__shared__ float s[1024]`, 1024 threads): the manifest's occupancy at
/// that launch, and the register count its lift names, are the header's.
#[test]
fn a_declared_launch_of_a_built_kernel_matches_header() {
    let s = occ_tests::Scratch::new();
    s.write(
        "kernels/k.cu",
        include_str!("../../fixtures/cu/declared/k.cu"),
    );
    let report = s
        .build(["sm_80", "sm_90"])
        .launch("fast_argmin_*", occ_build::Launch::block(1024))
        .try_compile_with(&occ_tests::build_env(&[]))
        .unwrap_or_else(|e| panic!("build failed: {e}"));
    let devs = devices();
    // (what, case, the blocks the manifest says)
    let mut checks: Vec<(String, Case, u32)> = Vec::new();
    for k in &report.manifest().expect("manifest").kernels {
        for (arch_name, a) in &k.archs {
            let Some(d) = a.declared.as_ref() else {
                continue;
            };
            let index = devs
                .iter()
                .position(|(_, _, x)| x.name == arch_name.as_str())
                .expect("arch in the device table") as u32;
            let case = |registers: u32| Case {
                arch: index,
                regs: registers,
                static_smem: a.facts.static_smem,
                max_dyn: devs[index as usize].2.smem_per_block_optin - a.facts.static_smem,
                barriers: a.facts.barriers.unwrap_or(1),
                fn_max_threads: a
                    .facts
                    .launch_bounds
                    .max_threads_per_block()
                    .unwrap_or(1024),
                virtual_res: 0,
                block_size: d.block_size,
                dyn_smem: d.dynamic_smem,
                carveout: -1,
                cache_pref: 0,
                gc: 0,
                tune_kind: 0,
                per_thread: 0,
                fixed: 0,
                num_blocks: 1,
            };
            let what = format!("{} on {arch_name} at {}", k.name, d.block_size);
            checks.push((
                what.clone(),
                case(a.facts.registers),
                d.active_blocks_per_sm,
            ));
            if let Some(hint) = d.lift.as_ref().and_then(|l| l.registers) {
                let target = d.lift.as_ref().map_or(0, |l| l.target_blocks);
                checks.push((
                    format!("{what}, {} registers", hint.max_registers),
                    case(hint.max_registers),
                    target,
                ));
            }
        }
    }
    // The fixture's argmin kernels at 1024, both archs, with a lift on sm_80.
    assert!(checks.len() >= 5, "{checks:?}");
    let mut input = device_table().into_bytes();
    for (_, c, _) in &checks {
        c.to_bytes(&mut input);
    }
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("occ-oracle-declared.bin");
    std::fs::write(&path, &input).expect("write declared input");
    let mut child = run_harness("random", &path);
    let mut out = child.stdout.take().expect("stdout");
    let mut rec = [0u8; 68];
    for (what, c, blocks) in &checks {
        out.read_exact(&mut rec).expect("result record");
        let status = i32::from_le_bytes(rec[0..4].try_into().expect("4 bytes"));
        let active = i32::from_le_bytes(rec[4..8].try_into().expect("4 bytes"));
        assert_eq!(status, 0, "{what}: {c:?}");
        assert_eq!(active, *blocks as i32, "{what}: header vs manifest, {c:?}");
    }
    assert!(child.wait().expect("harness").success());
}
