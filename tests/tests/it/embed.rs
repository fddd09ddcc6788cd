//! What a build embeds (`Build::embed`), checked with NVIDIA's own
//! `cuobjdump`, and `kernels.rs` as a table that a crate looks kernels up
//! in by name at run time.

use occ_model::schema::manifest::{DeviceCode, Embed};
use occ_model::schema::measured;
use occ_tests::{build_env, Scratch, ScratchCrate};
use std::path::{Path, PathBuf};
use std::process::Command;

fn cuobjdump() -> PathBuf {
    occ_tests::nvcc().with_file_name("cuobjdump")
}

/// `cuobjdump <args> <file>` run in `dir`; its stdout.
fn dump(dir: &Path, args: &[&str], file: &Path) -> String {
    let out = Command::new(cuobjdump())
        .args(args)
        .arg(file)
        .current_dir(dir)
        .output()
        .expect("run cuobjdump");
    assert!(out.status.success(), "{}", occ_tests::text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn files_in(dir: &Path, ext: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(ext))
        .collect();
    names.sort();
    names
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// PTX without comments, as whitespace-separated tokens per non-empty line.
fn ptx_tokens(ptx: &str) -> Vec<String> {
    ptx.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect()
}

#[test]
fn the_default_fatbin_holds_each_archs_cubin_and_the_newest_ptx_byte_for_byte() {
    let s = Scratch::new();
    s.copy_cu("embed", "kernels");
    let r = s
        .build(["sm_80", "sm_90"])
        .try_compile_with(&build_env(&[]))
        .expect("build");
    let blobs = &r.manifest().expect("manifest").device_code;
    assert_eq!(
        blobs
            .iter()
            .map(|b| (b.source.as_str(), b.kind, b.arch.as_deref()))
            .collect::<Vec<_>>(),
        [
            ("kernels/affine.cu", Embed::Fatbin, None),
            ("kernels/hopper.cu", Embed::Fatbin, None)
        ]
    );
    let out = s.path().join("out/occ");
    let folder = s.path().to_string_lossy().into_owned();
    // That the analysed code names the folder somewhere (so that the check
    // of the embedded code's means something).
    let mut named_folder = false;
    for blob in blobs {
        let fatbin = out.join(blob.file.as_deref().unwrap_or_default());
        assert!(
            !contains(&std::fs::read(&fatbin).expect("fatbin"), folder.as_bytes()),
            "{}: names the build's folder",
            blob.file.as_deref().unwrap_or_default()
        );
        let stem = blob
            .file
            .as_deref()
            .unwrap_or_default()
            .trim_end_matches(".fatbin");
        let listing = dump(s.path(), &["-lelf", "-lptx"], &fatbin);
        let elves: Vec<&str> = listing.lines().filter(|l| l.starts_with("ELF")).collect();
        let ptxs: Vec<&str> = listing.lines().filter(|l| l.starts_with("PTX")).collect();
        assert!(
            elves.len() == 2
                && elves[0].ends_with("sm_80.cubin")
                && elves[1].ends_with("sm_90.cubin"),
            "{listing}"
        );
        assert!(
            ptxs.len() == 1 && ptxs[0].ends_with("sm_90.ptx"),
            "{listing}"
        );
        // What is inside is exactly what the analysis measured, less its
        // line information: the `.embed.` copies byte for byte, whose code,
        // constants, resources and symbols are the analysed cubin's
        // (`cubin_hash`), with no line table and no path of this machine.
        let x = s.path().join(format!("x-{stem}"));
        std::fs::create_dir_all(&x).expect("mkdir");
        dump(&x, &["-xelf", "all"], &fatbin);
        dump(&x, &["-xptx", "all"], &fatbin);
        for arch in ["sm_80", "sm_90"] {
            let [got] = &files_in(&x, &format!("{arch}.cubin"))[..] else {
                panic!("one {arch} cubin in {}", x.display())
            };
            let embedded = std::fs::read(x.join(got)).expect("extracted");
            assert_eq!(
                embedded,
                std::fs::read(out.join(format!("{stem}.{arch}.embed.cubin"))).expect("shipped"),
                "{got}"
            );
            let analysed =
                std::fs::read(out.join(format!("{stem}.{arch}.cubin"))).expect("analysed");
            assert_eq!(
                measured::cubin_hash(&embedded),
                measured::cubin_hash(&analysed),
                "{got}: not the analysed code"
            );
            assert!(embedded.len() < analysed.len(), "{got}: lines not cut out");
            named_folder |= contains(&analysed, folder.as_bytes());
            assert!(
                !contains(&embedded, folder.as_bytes()),
                "{got}: the embedded cubin names the build's folder"
            );
            let lines = Command::new(occ_tests::nvcc().with_file_name("nvdisasm"))
                .arg("-g")
                .arg(x.join(got))
                .output()
                .expect("run nvdisasm");
            assert!(lines.status.success(), "{}", occ_tests::text(&lines));
            assert!(
                !String::from_utf8_lossy(&lines.stdout).contains("//## File"),
                "{got}: nvdisasm still finds lines"
            );
        }
        let [ptx] = &files_in(&x, ".ptx")[..] else {
            panic!("one PTX in {}", x.display())
        };
        // fatbinary drops PTX comments and indentation (as `nvcc -fatbin`
        // does): the same code, token for token, less `.loc` and `.file`.
        let analysed =
            std::fs::read_to_string(out.join(format!("{stem}.sm_90.ptx"))).expect("analysed");
        let extracted = std::fs::read_to_string(x.join(ptx)).expect("extracted");
        assert_eq!(
            ptx_tokens(&extracted),
            ptx_tokens(&analysed)
                .into_iter()
                .filter(|l| !l.starts_with(".loc ") && !l.starts_with(".file "))
                .collect::<Vec<_>>()
        );
        named_folder |= analysed.contains(&folder);
        assert!(
            !extracted.contains(&folder),
            "the embedded PTX names the folder"
        );
    }
    assert!(named_folder, "the analysed code never names the folder");
    // A second build reuses the fatbins: same files, same bytes.
    let mtimes = || -> Vec<_> {
        blobs
            .iter()
            .map(|b| {
                std::fs::metadata(out.join(b.file.as_deref().unwrap_or_default()))
                    .and_then(|m| m.modified())
                    .expect("mtime")
            })
            .collect()
    };
    let before = mtimes();
    let again = s
        .build(["sm_80", "sm_90"])
        .try_compile_with(&build_env(&[]))
        .expect("rebuild");
    assert_eq!(again.nvcc_runs, 0);
    assert_eq!(
        before,
        mtimes(),
        "the fatbins were rebuilt though nothing changed"
    );
}

#[test]
fn changing_what_is_embedded_or_the_archs_leaves_no_stale_file() {
    let s = Scratch::new();
    s.copy_cu("embed", "kernels");
    let out = s.path().join("out/occ");
    let build = |archs: &[&str], embed: Embed| {
        let mut b = occ_build::Build::new();
        b.root(s.path())
            .out_dir(s.path().join("out"))
            .glob("kernels/*.cu")
            .archs(archs.iter().copied())
            .embed(embed);
        b.try_compile_with(&build_env(&[])).expect("build")
    };
    build(&["sm_80", "sm_90"], Embed::Fatbin);
    assert_eq!(files_in(&out, ".fatbin").len(), 2);
    // PTX per file and arch; the fatbins (and their records) go.
    let r = build(&["sm_80", "sm_90"], Embed::Ptx);
    assert_eq!(
        r.nvcc_runs, 0,
        "the analysis does not depend on what is embedded"
    );
    let files: Vec<(&str, Option<&str>, &str)> = r
        .manifest()
        .expect("manifest")
        .device_code
        .iter()
        .map(|b: &DeviceCode| {
            (
                b.source.as_str(),
                b.arch.as_deref(),
                b.file.as_deref().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(files.len(), 4, "{files:?}");
    assert!(
        files.iter().all(|(_, _, f)| f.ends_with(".ptx")),
        "{files:?}"
    );
    assert!(files_in(&out, ".fatbin").is_empty());
    assert!(files_in(&out.join("cache"), ".fatbin.json").is_empty());
    let rs = s.read("out/occ/device_code.rs");
    assert_eq!(rs.matches("CodeKind::Ptx, arch: Some(").count(), 4, "{rs}");
    // sm_90 dropped: its cubins, PTX and records go; sm_80's stay.
    build(&["sm_80"], Embed::Fatbin);
    let left: Vec<String> = files_in(&out, "")
        .into_iter()
        .chain(files_in(&out.join("cache"), ""))
        .filter(|n| n.contains("sm_90"))
        .collect();
    assert!(left.is_empty(), "left from sm_90: {left:?}");
    assert_eq!(files_in(&out, ".sm_80.cubin").len(), 2);
    assert_eq!(files_in(&out.join("cache"), ".sm_80.json").len(), 2);
    // A source removed from the build: its files go too.
    std::fs::remove_file(s.path().join("kernels/hopper.cu")).expect("rm");
    build(&["sm_80"], Embed::Fatbin);
    let left: Vec<String> = files_in(&out, "")
        .into_iter()
        .chain(files_in(&out.join("cache"), ""))
        .filter(|n| n.contains("hopper"))
        .collect();
    assert!(left.is_empty(), "left from hopper.cu: {left:?}");
}

#[test]
fn ptx_blobs_end_with_exactly_one_nul() {
    // `cuModuleLoadData` reads PTX as a C string; the guide hands it a
    // blob's bytes as they are.
    let s = Scratch::new();
    s.write(
        "kernels/k.cu",
        "extern \"C\" __global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }\n",
    );
    let mut b = s.build(["sm_80"]);
    b.embed(Embed::Ptx);
    let r = b.try_compile_with(&build_env(&[])).expect("build");
    let blobs = &r.manifest().expect("manifest").device_code;
    assert_eq!(blobs.len(), 1, "{blobs:?}");
    let bytes = std::fs::read(r.out_dir.join(blobs[0].file.as_deref().unwrap_or_default()))
        .expect("the blob");
    let text = bytes.strip_suffix(&[0]).expect("a NUL at the end");
    assert!(!text.contains(&0), "one NUL, at the end only");
    assert!(
        String::from_utf8_lossy(text).contains(".entry k("),
        "the PTX itself before it"
    );
    let rs = std::fs::read_to_string(r.out_dir.join("device_code.rs")).expect("device_code.rs");
    assert!(
        rs.contains(&format!(", {})", bytes.len())) || rs.contains("include_bytes!"),
        "the blob's length counts the NUL: {rs}"
    );
}

const MAIN: &str = r#"mod kernels {
    include!(concat!(env!("OUT_DIR"), "/occ/kernels.rs"));
}

fn main() {
    // Looked up by a name made at run time, as candle does.
    for dtype in ["f32", "f64", "bf16"] {
        match kernels::get(&format!("affine_{dtype}")) {
            Some(k) => {
                let sm_80 = k.on("sm_80").expect("built for sm_80");
                let code = sm_80.code.expect("embedded");
                println!("{} {} {} {:?} {}", k.name, k.source, sm_80.registers, code.kind, code.bytes.len());
            }
            None => println!("affine_{dtype} none"),
        }
    }
    // A kernel of one arch: present in the table, absent on the other arch.
    let only = kernels::get("only_sm90").expect("only_sm90");
    println!("only_sm90 sm_80={} sm_90={}", only.on("sm_80").is_some(), only.on("sm_90").is_some());
    // Generic code over every kernel and arch.
    let rows: usize = kernels::KERNELS.iter().map(|k| k.archs.len()).sum();
    println!("kernels={} rows={} blobs={} archs={:?}", kernels::KERNELS.len(), rows, kernels::DEVICE_CODE.len(), kernels::ARCHS);
    // A kernel's entry by its module (`KernelId`, decoded with the table).
    println!("const={}", kernels::affine_f32::KERNEL.archs[0].registers);
}
"#;

#[test]
fn a_crate_looks_kernels_up_by_name_and_handles_a_kernel_of_one_arch() {
    let krate = ScratchCrate::new("embeduser")
        .dep("occ")
        .build_dep("occ-build")
        .build_rs(occ_tests::BUILD_RS)
        .cu("embed", "kernels")
        .file("src/main.rs", MAIN);
    let stdout = krate.run("build and run");
    let manifest = occ_shell::files::read_manifest(
        &occ_tests::surroundings::newest_out_dir("embeduser").join("occ/manifest.json"),
    )
    .expect("manifest");
    let f32_sm80 = &manifest
        .kernels
        .iter()
        .find(|k| k.name == "affine_f32")
        .expect("affine_f32")
        .archs["sm_80"];
    let fatbin_len = |source: &str| {
        let blob = manifest
            .device_code
            .iter()
            .find(|b| b.source == source)
            .expect("blob");
        std::fs::metadata(
            occ_tests::surroundings::newest_out_dir("embeduser")
                .join("occ")
                .join(blob.file.as_deref().unwrap_or_default()),
        )
        .expect("fatbin")
        .len()
    };
    let affine = fatbin_len("kernels/affine.cu");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "affine_f32 kernels/affine.cu {} Fatbin {affine}",
                f32_sm80.facts.registers
            )
            .as_str(),
            format!(
                "affine_f64 kernels/affine.cu {} Fatbin {affine}",
                manifest
                    .kernels
                    .iter()
                    .find(|k| k.name == "affine_f64")
                    .expect("affine_f64")
                    .archs["sm_80"]
                    .facts
                    .registers
            )
            .as_str(),
            "affine_bf16 none",
            "only_sm90 sm_80=false sm_90=true",
            "kernels=3 rows=5 blobs=2 archs=[\"sm_80\", \"sm_90\"]",
            format!("const={}", f32_sm80.facts.registers).as_str(),
        ],
        "{stdout}"
    );
}

/// Two `Build`s of one build script: the default one (`kernels/`) and one
/// named `extra` (`extra/`), into `out`.
fn two_parts(root: &Path, out: &Path, env: &occ_shell::Env) -> [occ_build::Report; 2] {
    let mut ptx = occ_build::Build::new();
    ptx.root(root)
        .out_dir(out)
        .glob("kernels/*.cu")
        .arch("sm_80");
    let mut extra = occ_build::Build::new();
    extra
        .root(root)
        .out_dir(out)
        .name("extra")
        .glob("extra/*.cu")
        .arch("sm_80");
    [
        ptx.try_compile_with(env).expect("default part"),
        extra.try_compile_with(env).expect("part `extra`"),
    ]
}

#[test]
fn several_builds_in_one_build_script_share_kernels_rs_and_the_lock() {
    let s = Scratch::new();
    s.write(
        "kernels/affine.cu",
        &occ_tests::fixture("cu/embed/affine.cu"),
    );
    s.write("extra/hopper.cu", &occ_tests::fixture("cu/embed/hopper.cu"));
    s.write(
        "extra/scale.cu",
        "extern \"C\" __global__ void scale2(float* p) { p[threadIdx.x] *= 2.0f; }\n",
    );
    let out = s.path().join("out");
    let [first, second] = two_parts(s.path(), &out, &build_env(&[("OCC_BLESS", Some("1"))]));
    let names = |m: &occ_model::schema::manifest::Manifest| -> Vec<(String, String)> {
        m.kernels
            .iter()
            .map(|k| (k.name.clone(), k.source.clone()))
            .collect()
    };
    assert_eq!(
        names(first.manifest().expect("manifest")).len(),
        2,
        "after the first part"
    );
    assert_eq!(
        names(second.manifest().expect("manifest")),
        [
            ("affine_f32".to_string(), "kernels/affine.cu".to_string()),
            ("affine_f64".into(), "kernels/affine.cu".into()),
            ("scale2".into(), "extra/scale.cu".into()),
        ],
        "every part's kernels (only_sm90 has no sm_80 code)"
    );
    let rs = s.read("out/occ/kernels.rs");
    for ident in ["affine_f32", "affine_f64", "scale2"] {
        assert!(rs.contains(&format!("pub mod {ident} {{")), "{ident}: {rs}");
    }
    let dc = s.read("out/occ/device_code.rs");
    assert!(dc.contains("/occ/extra@extra_scale.fatbin"), "{dc}");
    // The lock holds both parts and says which sources are `extra`'s.
    let lock = s.read("occ.lock");
    let lock =
        occ_model::schema::lock::Lock::from_text(&lock, Path::new("occ.lock")).expect("lock");
    assert_eq!(lock.kernels.len(), 3);
    assert_eq!(
        lock.parts.get("extra").map(Vec::as_slice),
        Some(&["extra/hopper.cu".to_string(), "extra/scale.cu".to_string()][..])
    );
    // Rebuilt: no part recompiles or removes the other's files.
    let [a, b] = two_parts(s.path(), &out, &build_env(&[]));
    assert_eq!((a.nvcc_runs, b.nvcc_runs), (0, 0));
    // A fresh OUT_DIR (CI): the first part's gate must not call the second
    // part's kernels gone, and the second's must not call the first's new.
    let fresh = s.path().join("fresh");
    let [a, b] = two_parts(s.path(), &fresh, &build_env(&[("CI", Some("1"))]));
    assert_eq!(
        b.manifest().expect("manifest"),
        second.manifest().expect("manifest")
    );
    for r in [&a, &b] {
        assert!(
            r.directives().warnings().is_empty(),
            "{:?}",
            r.directives().warnings()
        );
    }
    // A bad name says what names may hold.
    let mut bad = occ_build::Build::new();
    bad.root(s.path())
        .out_dir(&out)
        .name("moe/x")
        .glob("extra/*.cu")
        .arch("sm_80");
    let e = bad.try_compile_with(&build_env(&[])).expect_err("bad name");
    assert!(e.to_string().contains("may hold only letters"), "{e}");
}

/// The build script of both crates of the two-crate test: one arch, no
/// source lines (so that the same `.cu` file gives the same bytes in both).
const DC_BUILD_RS: &str = r#"fn main() {
    occ_build::Build::new().glob("kernels/*.cu").arch("sm_80").source_lines(false).compile();
}
"#;

/// A kernel of `extra.cu` that scales by `by`: the two crates' files of
/// that name differ.
fn extra_cu(by: &str) -> String {
    format!("extern \"C\" __global__ void scale(float* p) {{ p[threadIdx.x] *= {by}f; }}\n")
}

/// The binary: writes every blob of its own table and of its dependency's
/// into the folder given as its argument (`app.<i>`, `dep.<i>`) and prints
/// `<crate> <i> <source> <len> <address>` for each.
const DC_MAIN: &str = r#"mod kernels {
    include!(concat!(env!("OUT_DIR"), "/occ/kernels.rs"));
}

fn main() {
    let dir = std::path::PathBuf::from(std::env::args().nth(1).expect("a folder"));
    for (name, code) in [("app", kernels::DEVICE_CODE), ("dep", occdcdep::kernels::DEVICE_CODE)] {
        for (i, c) in code.iter().enumerate() {
            std::fs::write(dir.join(format!("{name}.{i}")), c.bytes).expect("write");
            println!("{name} {i} {} {} {}", c.source, c.bytes.len(), c.bytes.as_ptr() as usize);
        }
    }
}
"#;

/// The members of an `ar` archive (an rlib): (name, bytes).
fn ar_members(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
    assert!(bytes.starts_with(b"!<arch>\n"), "not an archive");
    let (mut at, mut members) = (8, Vec::new());
    while at + 60 <= bytes.len() {
        let header = String::from_utf8_lossy(&bytes[at..at + 60]).into_owned();
        let size: usize = header[48..58].trim().parse().expect("member size");
        let name = header[..16].trim().trim_end_matches('/').to_string();
        members.push((name, bytes[at + 60..at + 60 + size].to_vec()));
        at += 60 + size + size % 2;
    }
    members
}

fn holds(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The newest `lib<name>-*.rlib` of the scratch target folder.
fn newest_rlib(name: &str) -> PathBuf {
    let deps = occ_tests::scratch_target_dir().join("debug/deps");
    std::fs::read_dir(&deps)
        .expect("deps")
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&format!("lib{name}-")) && n.ends_with(".rlib")
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .expect("an rlib")
        .path()
}

/// Builds and runs the app with `cargo` (a [`occ_tests::cargo`]), then
/// checks every blob it wrote against the file in its crate's OUT_DIR,
/// byte for byte, and its address for 16-byte alignment; returns the
/// printed lines.
fn run_and_compare_with(mut cargo: Command, app: &Path, blobs: &Path) -> Vec<String> {
    let _ = std::fs::remove_dir_all(blobs);
    std::fs::create_dir_all(blobs).expect("mkdir");
    let out = occ_tests::succeed(
        cargo
            .args(["run", "--quiet", "--"])
            .arg(blobs)
            .current_dir(app),
        "build and run the app",
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    for (name, package) in [("app", "occdcapp"), ("dep", "occdcdep")] {
        let out_dir = occ_tests::surroundings::newest_out_dir(package).join("occ");
        let manifest =
            occ_shell::files::read_manifest(&out_dir.join("manifest.json")).expect("manifest");
        assert_eq!(manifest.device_code.len(), 2, "{name}");
        for (i, blob) in manifest.device_code.iter().enumerate() {
            let file = std::fs::read(out_dir.join(blob.file.as_deref().unwrap_or_default()))
                .expect("blob file");
            let got = std::fs::read(blobs.join(format!("{name}.{i}"))).expect("written");
            assert!(
                got == file,
                "{name}'s {}: the binary holds {} bytes, the file has {}\n{stdout}",
                blob.file.as_deref().unwrap_or_default(),
                got.len(),
                file.len()
            );
        }
    }
    let lines: Vec<String> = stdout.lines().map(str::to_string).collect();
    for line in &lines {
        let address: usize = line
            .rsplit(' ')
            .next()
            .and_then(|a| a.parse().ok())
            .expect("address");
        assert_eq!(address % 16, 0, "16-byte aligned: {line}");
    }
    lines
}

#[test]
fn two_crates_in_one_binary_hold_their_own_bytes_and_none_in_the_rmeta() {
    // Both crates embed `affine.cu` (the same bytes) and an `extra.cu` of
    // their own (other bytes, the same file name), into a target folder
    // with a space in its name (OUT_DIR is written in an assembler string).
    let s = Scratch::new();
    let target = s.path().join("tar get");
    std::os::unix::fs::symlink(occ_tests::scratch_target_dir(), &target).expect("symlink");
    let affine = occ_tests::fixture("cu/embed/affine.cu");
    let occ = occ_tests::path_dep("occ");
    let occ_build = occ_tests::path_dep("occ-build");
    // One crate: its manifest's extra lines, its `extra.cu`'s constant,
    // its Rust source.
    let write_crate = |dir: &str,
                       name: &str,
                       extra: &str,
                       value: &str,
                       (rs, text): (&str, &str)| {
        s.write(
            &format!("{dir}/Cargo.toml"),
            &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\n{extra}\n[dependencies]\n{occ}\n{deps}\n[build-dependencies]\n{occ_build}\n",
                deps = if extra.is_empty() { "" } else { "occdcdep = { path = \"../dep\" }\n" }),
        );
        s.write(&format!("{dir}/build.rs"), DC_BUILD_RS);
        s.write(&format!("{dir}/kernels/affine.cu"), &affine);
        s.write(&format!("{dir}/kernels/extra.cu"), &extra_cu(value));
        s.write(&format!("{dir}/src/{rs}"), text);
    };
    write_crate(
        "dep",
        "occdcdep",
        "",
        "2.0",
        (
            "lib.rs",
            "pub mod kernels {\n    include!(concat!(env!(\"OUT_DIR\"), \"/occ/kernels.rs\"));\n}\n",
        ),
    );
    write_crate(
        "app",
        "occdcapp",
        "\n[workspace]\n",
        "3.0",
        ("main.rs", DC_MAIN),
    );
    let app = s.path().join("app");
    let blobs = s.path().join("blobs");
    let run = || -> Vec<String> {
        // One job at a time: two occ-build scripts at once on two cores
        // wait for each other's jobserver token (a worker takes a job, then
        // waits for a token that the other script's implicit one holds).
        let mut cmd = occ_tests::cargo();
        cmd.env("CARGO_TARGET_DIR", &target)
            .env("CARGO_BUILD_JOBS", "1");
        run_and_compare_with(cmd, &app, &blobs)
    };
    let lines = run();
    // The same file of the same bytes in both crates: one copy.
    let address = |name: &str, source: &str| -> String {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("{name} ")) && l.contains(source))
            .and_then(|l| l.rsplit(' ').next())
            .expect("printed")
            .to_string()
    };
    assert_eq!(
        address("app", "affine.cu"),
        address("dep", "affine.cu"),
        "{lines:#?}"
    );
    assert_ne!(
        address("app", "extra.cu"),
        address("dep", "extra.cu"),
        "{lines:#?}"
    );
    // The dependency's rlib holds each blob in its object code, not in
    // its metadata.
    let rlib = std::fs::read(newest_rlib("occdcdep")).expect("rlib");
    let members = ar_members(&rlib);
    let out_dir = occ_tests::surroundings::newest_out_dir("occdcdep").join("occ");
    let manifest =
        occ_shell::files::read_manifest(&out_dir.join("manifest.json")).expect("manifest");
    for blob in &manifest.device_code {
        let bytes =
            std::fs::read(out_dir.join(blob.file.as_deref().unwrap_or_default())).expect("blob");
        // 64 bytes of the blob found nowhere by chance (not padding).
        let probe = (bytes.len() / 2..bytes.len() - 64)
            .map(|at| &bytes[at..at + 64])
            .find(|w| w.iter().collect::<std::collections::BTreeSet<_>>().len() >= 32)
            .expect("a varied window");
        for (name, member) in &members {
            if name.ends_with(".rmeta") {
                assert!(
                    !holds(member, probe),
                    "{} is in {name}",
                    blob.file.as_deref().unwrap_or_default()
                );
            }
        }
        assert!(
            // Objects by their ELF magic: a long member name is an index
            // into the archive's name table.
            members
                .iter()
                .any(|(_, m)| m.starts_with(b"\x7fELF") && holds(m, probe)),
            "{} is in no object of the rlib",
            blob.file.as_deref().unwrap_or_default()
        );
    }
    // An edit of the dependency's kernel (bytes of the same length): the
    // incremental rebuild embeds the new bytes, not its cached object's.
    s.write("dep/kernels/extra.cu", &extra_cu("5.0"));
    run();
}
