//! `cargo occ calc`, run as a binary, against `cuda_occupancy.h` and the
//! library.

use crate::{occ, Ran};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

/// A `--json` or `--batch` run's stdout, one object per line.
fn json_lines(o: &Ran) -> Vec<serde_json::Value> {
    o.out
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

#[test]
fn readme_example_as_cargo_subcommand() {
    // cargo runs `cargo-occ occ calc ...`, as `occ` does.
    let o = occ(
        Path::new("."),
        &[
            "calc",
            "--arch",
            "sm_80",
            "--regs",
            "40",
            "--threads",
            "256",
            "--static-smem",
            "16384",
        ],
        &[],
        None,
    );
    assert_eq!(o.code, 0, "{o:?}");
    let text = &o.out;
    assert!(text.contains("active blocks     6 per SM"), "{text}");
    assert!(text.contains("active warps      48 of 64 per SM"), "{text}");
    assert!(text.contains("occupancy         75%"), "{text}");
    assert!(text.contains("limited by        registers"), "{text}");
    assert!(text.contains("best block size   768 threads"), "{text}");
}

#[test]
fn json_matches_header_vectors() {
    // Vectors computed with g++ against cuda_occupancy.h (CUDA 13.5), from
    // shared/reference/occupancy-algorithm.md.
    // (flags, blocks, warps, limiters, best block size)
    type Vector<'a> = (&'a [&'a str], u64, u64, &'a [&'a str], u64);
    let cases: [Vector<'_>; 3] = [
        (
            &[
                "--arch",
                "sm_80",
                "--regs",
                "40",
                "--threads",
                "256",
                "--static-smem",
                "16384",
            ],
            6,
            48,
            &["registers"],
            768,
        ),
        (
            &["--arch", "sm_90", "--regs", "32", "--threads", "1024"],
            2,
            64,
            &["warps", "registers"],
            1024,
        ),
        (
            &[
                "--arch",
                "sm_86",
                "--regs",
                "64",
                "--threads",
                "128",
                "--dynamic-smem",
                "49152",
            ],
            2,
            8,
            &["shared memory"],
            1024,
        ),
    ];
    for (args, blocks, warps, limiters, best) in cases {
        let mut a = vec!["calc", "--json"];
        a.extend_from_slice(args);
        let o = occ(Path::new("."), &a, &[], None);
        assert_eq!(o.code, 0, "{o:?}");
        let v = &json_lines(&o)[0];
        assert_eq!(v["active_blocks_per_sm"], blocks, "{args:?}");
        assert_eq!(v["active_warps_per_sm"], warps, "{args:?}");
        assert_eq!(v["limiters"], serde_json::json!(limiters), "{args:?}");
        assert_eq!(v["best_block_size"], best, "{args:?}");
    }
}

#[test]
fn bad_input_exits_2() {
    let o = occ(
        Path::new("."),
        &["calc", "--arch", "sm_99", "--regs", "1", "--threads", "32"],
        &[],
        None,
    );
    assert_eq!(o.code, 2);
    let err = o.err;
    assert!(
        err.contains("unknown CUDA architecture `sm_99`") && err.contains("sm_80"),
        "{err}"
    );
    let o = occ(
        Path::new("."),
        &["calc", "--arch", "sm_80", "--regs", "1"],
        &[],
        None,
    );
    assert_eq!(o.code, 2);
    let o = occ(
        Path::new("."),
        &[
            "calc",
            "--arch",
            "sm_80",
            "--regs",
            "1",
            "--threads",
            "64",
            "--max-threads",
            "32",
        ],
        &[],
        None,
    );
    assert_eq!(o.code, 2);
    assert!(o.err.contains("__launch_bounds__"));
}

/// stderr of `cargo occ calc --arch sm_80 ARGS`, which must exit 2.
fn usage_error(args: &[&str]) -> String {
    let o = occ(
        Path::new("."),
        &[&["calc", "--arch", "sm_80"], args].concat(),
        &[],
        None,
    );
    let err = o.err.clone();
    assert_eq!(o.code, 2, "{args:?}: {err}");
    assert!(o.out.is_empty(), "{args:?}: {}", o.out);
    err
}

#[test]
fn usage_lists_only_the_required_flags_and_ranges_are_enforced() {
    // A flag with a default, given, does not appear required in the usage.
    let err = usage_error(&["--regs", "32", "--static-smem", "1000"]);
    assert!(err.contains("--threads"), "{err}");
    let usage = err
        .lines()
        .find(|l| l.starts_with("Usage:"))
        .unwrap_or_else(|| panic!("no usage line in {err}"));
    assert!(!usage.contains("--static-smem"), "{usage}");
    assert!(usage.contains("[OPTIONS]"), "{usage}");

    // Each number out of its range: exit 2 and the valid range named.
    for (flag, bad, range) in [
        ("--regs", "4294967295", "0..=255"),
        ("--regs", "256", "0..=255"),
        ("--threads", "0", "1..=1024"),
        ("--threads", "1025", "1..=1024"),
        ("--max-threads", "0", "1..=1024"),
        ("--max-threads", "2048", "1..=1024"),
        ("--carveout", "101", "0..=100"),
        ("--barriers", "17", "0..=16"),
    ] {
        let mut args = vec!["--regs", "32", "--threads", "256"];
        match args.iter().position(|a| *a == flag) {
            Some(i) => args[i + 1] = bad,
            None => args.extend([flag, bad]),
        }
        let err = usage_error(&args);
        assert!(
            err.contains(flag) && err.contains(range),
            "{flag} {bad}: {err}"
        );
        assert!(!err.contains("use at most 0"), "{err}");
    }
    // The ends of each range are accepted.
    for args in [
        ["--regs", "255", "--threads", "1024"],
        ["--regs", "0", "--threads", "1"],
    ] {
        let o = occ(
            Path::new("."),
            &[&["calc", "--arch", "sm_80"], &args[..]].concat(),
            &[],
            None,
        );
        assert_eq!(o.code, 0, "{args:?}: {o:?}");
    }

    // --batch lines obey the same ranges.
    let input = "{\"arch\":\"sm_80\",\"regs\":300,\"threads\":256}\n\
                 {\"arch\":\"sm_80\",\"regs\":32,\"threads\":256,\"max_threads\":0}\n\
                 {\"arch\":\"sm_80\",\"regs\":255,\"threads\":1024,\"barriers\":16}\n";
    let o = occ(Path::new("."), &["calc", "--batch", "-"], &[], Some(input));
    assert_eq!(o.code, 2, "{o:?}");
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 3);
    let error = |i: usize| lines[i]["error"].as_str().unwrap_or_default().to_string();
    assert!(
        error(0).contains("regs 300") && error(0).contains("0 to 255"),
        "{}",
        error(0)
    );
    assert!(
        error(1).contains("max_threads 0") && error(1).contains("1 to 1024"),
        "{}",
        error(1)
    );
    assert!(lines[2].get("error").is_none(), "{}", lines[2]);
}

#[test]
fn batch_keeps_order_and_reports_bad_lines() {
    let input = "{\"arch\":\"sm_90\",\"regs\":32,\"threads\":1024}\n\
                 \n\
                 {\"arch\":\"sm_99\",\"regs\":1,\"threads\":1}\n\
                 not json\n\
                 {\"arch\":\"sm_80\",\"regs\":40,\"threads\":256,\"static_smem\":16384,\"max_threads\":512}\n\
                 {\"arch\":\"sm_80\",\"regs\":40,\"threads\":256,\"typo\":1}\n";
    let o = occ(Path::new("."), &["calc", "--batch", "-"], &[], Some(input));
    assert_eq!(o.code, 2, "{o:?}");
    let lines = json_lines(&o);
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[0]["active_blocks_per_sm"], 2);
    assert!(lines[1]["error"].as_str().unwrap().contains("sm_99"));
    assert!(lines[2]["error"].as_str().unwrap().contains("line 4"));
    assert_eq!(lines[3]["active_blocks_per_sm"], 6);
    // Capped by max_threads: 512 × 3 blocks beats 384 × 4? No: 384 × 4 =
    // 1536 = 512 × 3; the tie keeps the larger block.
    assert_eq!(lines[3]["best_block_size"], 512);
    assert!(lines[4]["error"].as_str().unwrap().contains("typo"));

    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let file = dir.join("calc-batch.jsonl");
    std::fs::write(&file, "{\"arch\":\"sm_90\",\"regs\":32,\"threads\":1024}\n").unwrap();
    let o = occ(
        Path::new("."),
        &["calc", "--batch", file.to_str().unwrap()],
        &[],
        None,
    );
    assert_eq!(o.code, 0);
    assert_eq!(json_lines(&o).len(), 1);
    let o = occ(
        Path::new("."),
        &["calc", "--batch", "/nonexistent/occ.jsonl"],
        &[],
        None,
    );
    assert_eq!(o.code, 1);
}

/// Batch answers for a grid of inputs against the real header, through the
/// oracle harness of `occ-tests`.
#[test]
fn batch_matches_cuda_occupancy_h() {
    let bin = occ_tests::oracle::harness(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let archs = occ_model::model::arch::all();
    let devices: Vec<_> = archs.iter().map(|a| (a.major, a.minor, a)).collect();
    let table = occ_tests::oracle::device_table(&devices);
    let mut cases = Vec::new();
    let mut bin_in = table.into_bytes();
    let mut jsonl = String::new();
    for (i, a) in archs.iter().enumerate() {
        for regs in [0u32, 24, 40, 72, 128, 255] {
            for threads in [32u32, 100, 256, 640, 1024] {
                for (stat, dynamic, carveout, barriers, max_threads) in [
                    (0u32, 0u32, -1i32, 1u32, 1024u32),
                    (16384, 0, 50, 1, 1024),
                    (2000, 9000, 0, 3, 1024),
                    (0, 30000, -1, 1, 1024),
                ] {
                    let max_dyn = a.smem_per_block_optin - stat;
                    let case = [
                        i as i32,
                        regs as i32,
                        stat as i32,
                        max_dyn as i32,
                        barriers as i32,
                        max_threads as i32,
                        0,
                        threads as i32,
                        dynamic as i32,
                        carveout,
                        0,
                        0,
                        0,
                        0,
                        dynamic as i32,
                        1,
                    ];
                    for v in case {
                        bin_in.extend_from_slice(&v.to_le_bytes());
                    }
                    let carve = if carveout >= 0 {
                        format!(",\"carveout\":{carveout}")
                    } else {
                        String::new()
                    };
                    jsonl += &format!(
                        "{{\"arch\":\"{}\",\"regs\":{regs},\"threads\":{threads},\"static_smem\":{stat},\
                         \"dynamic_smem\":{dynamic},\"barriers\":{barriers}{carve}}}\n",
                        a.name
                    );
                    cases.push((a.name, regs, threads, stat, dynamic, carveout));
                }
            }
        }
    }
    let mut child = Command::new(bin)
        .arg("random")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run harness");
    let mut pipe = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || pipe.write_all(&bin_in));
    let header = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(header.status.success());
    assert_eq!(header.stdout.len(), cases.len() * 68);

    let o = occ(Path::new("."), &["calc", "--batch", "-"], &[], Some(&jsonl));
    assert_eq!(o.code, 0, "{}", o.err);
    let ours = json_lines(&o);
    assert_eq!(ours.len(), cases.len());
    let names = [
        "warps",
        "registers",
        "shared memory",
        "blocks",
        "barriers",
        "virtual resources",
    ];
    let mut mismatches = Vec::new();
    for (n, (case, v)) in cases.iter().zip(&ours).enumerate() {
        let rec = &header.stdout[n * 68..n * 68 + 68];
        let h = |i: usize| i32::from_le_bytes(rec[i * 4..i * 4 + 4].try_into().unwrap()) as i64;
        let flags = h(2);
        let limiters: Vec<&str> = (0..6)
            .filter(|b| flags & (1 << b) != 0)
            .map(|b| names[b])
            .collect();
        let want = (h(1), serde_json::json!(limiters), h(13));
        let got = (
            v["active_blocks_per_sm"].as_i64().unwrap_or(-1),
            v["limiters"].clone(),
            v["best_block_size"].as_i64().unwrap_or(-1),
        );
        if want != got {
            mismatches.push(format!("{case:?}: header {want:?}, calc {got:?}"));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} differ:\n{}",
        mismatches.len(),
        cases.len(),
        mismatches[..mismatches.len().min(10)].join("\n")
    );
}
