//! Measured launches: the results file a tuner writes after timing a
//! kernel's [`crate::model::suggest::candidates`] on a GPU, and the `measured`
//! section of `occ.lock` that `cargo occ tune import` merges it into.
//!
//! A results file ([`Results`], schema [`RESULTS_SCHEMA`]) names the device
//! (name, compute capability, SM count, clocks when known), the toolkit, and
//! per kernel × arch × problem-size bucket the cubin's and the candidate
//! set's hashes and each candidate's median time, runs and noise:
//!
//! ```text
//! {
//!   "schema": 1,
//!   "package": "app",
//!   "device": {"name": "NVIDIA H200", "compute_capability": "9.0", "sm_count": 132},
//!   "toolkit": "V13.5.37",
//!   "measurements": [
//!     {"kernel": "saxpy", "source": "kernels/saxpy.cu", "arch": "sm_90", "bucket": "n=1M",
//!      "cubin_hash": "fnv1a64:…", "candidates_hash": "fnv1a64:…",
//!      "timings": [{"block_size": 256, "median_us": 11.5, "runs": 50, "noise": 0.01}]}
//!   ]
//! }
//! ```
//!
//! In the lock each measurement is one [`Measured`] line, sorted by kernel,
//! source, arch and bucket, with its fastest block size (`best`) written
//! out. A build bakes `best` for that arch and bucket unless the cubin it
//! was measured on differs from the current one ([`Staleness`]).

use crate::error::{Error, Result};
use crate::schema::manifest;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The manifest schema's types this module fills (defined in [`crate::schema::manifest`]).
pub use crate::schema::manifest::{Measured, Timing};

/// The schema version of a results file.
pub const RESULTS_SCHEMA: u32 = 1;

/// The default name of a results file.
pub const RESULTS_FILE: &str = "occ-tune.json";

/// The bucket of a site that names none.
pub const DEFAULT_BUCKET: &str = "default";

/// The GPU a measurement ran on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    /// The device's name (`NVIDIA H200`).
    pub name: String,
    /// Compute capability, `major.minor` (`9.0`).
    pub compute_capability: String,
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// The SM clock, kHz, when the driver reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_khz: Option<u32>,
    /// The memory clock, kHz, when the driver reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_clock_khz: Option<u32>,
}

/// One kernel × arch × bucket timed on a device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// The kernel's symbol.
    pub kernel: String,
    /// Its source, relative to the crate.
    pub source: String,
    /// The arch of the cubin that ran (`sm_90`).
    pub arch: String,
    /// The problem-size bucket the user named (`n=1M`).
    pub bucket: String,
    /// [`cubin_hash`] of the cubin that ran.
    pub cubin_hash: String,
    /// [`candidates_hash`] of the block sizes timed.
    pub candidates_hash: String,
    /// The max-occupancy block of the site that was timed (the model's
    /// choice under the site's options, which the speed-up is over), when
    /// the tuner recorded it; without it the report compares with the
    /// kernel's best block without options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_occupancy: Option<u32>,
    /// Each candidate's time.
    pub timings: Vec<Timing>,
}

/// A results file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Results {
    /// Schema version ([`RESULTS_SCHEMA`]).
    pub schema: u32,
    /// The cargo package whose kernels were timed.
    pub package: String,
    /// The GPU.
    pub device: Device,
    /// The toolkit that built the cubins (nvcc's version, `V13.5.37`).
    pub toolkit: String,
    /// The measurements.
    pub measurements: Vec<Measurement>,
}

/// Whether a measurement still describes the kernel of this build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Staleness {
    /// Measured on this build's cubin.
    Current,
    /// The cubin changed since the measurement, or this build has no hash
    /// of its code to compare with.
    Stale {
        /// The hash the measurement was taken on.
        measured: String,
        /// The hash of this build's cubin; `None`: the build has none (a
        /// lock from before occ kept them).
        current: Option<String>,
    },
}

impl Measured {
    /// The key a lock holds one entry per: kernel, source, arch, bucket.
    pub fn key(&self) -> (&str, &str, &str, &str) {
        (&self.kernel, &self.source, &self.arch, &self.bucket)
    }

    /// The time at `block_size`, if it was timed.
    pub fn time_at(&self, block_size: u32) -> Option<f64> {
        self.timings
            .iter()
            .find(|t| t.block_size == block_size)
            .map(|t| t.median_us)
    }

    /// How much faster `best` is than `baseline` (time at `baseline` / time
    /// at `best`), when both were timed.
    pub fn speedup_over(&self, baseline: u32) -> Option<f64> {
        Some(self.time_at(baseline)? / self.time_at(self.best)?)
    }

    /// Compares the measured cubin with this build's: its `cubin_hash`,
    /// `None` when it has none. A build from the lock has the lock's hash;
    /// with none (a lock from before occ kept them) the code of today is
    /// not known to be the measured code, so the measurement is stale, as
    /// a build with nvcc would find it. A measurement of a kernel the
    /// build does not have is no question for this: its caller finds no
    /// `KernelArch` to take the hash from.
    pub fn staleness(&self, current_cubin_hash: Option<&str>) -> Staleness {
        match current_cubin_hash {
            Some(h) if h == self.cubin_hash => Staleness::Current,
            current => Staleness::Stale {
                measured: self.cubin_hash.clone(),
                current: current.map(str::to_string),
            },
        }
    }
}

/// Whether `cc` is a compute capability as the driver reports it:
/// `major.minor`, the major one or two digits without a leading zero, the
/// minor one digit (`9.0`, `12.1`), so that `sm_` and its digits name an
/// arch.
pub fn is_compute_capability(cc: &str) -> bool {
    let Some((major, minor)) = cc.split_once('.') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    digits(major)
        && major.len() <= 2
        && !major.starts_with('0')
        && digits(minor)
        && minor.len() == 1
}

/// The fastest timing: the smallest median, ties to the larger block (as
/// the occupancy search keeps the larger block on a tie).
pub fn fastest(timings: &[Timing]) -> Option<&Timing> {
    timings.iter().min_by(|a, b| {
        a.median_us
            .total_cmp(&b.median_us)
            .then(b.block_size.cmp(&a.block_size))
    })
}

/// FNV-1a, 64 bits, as `fnv1a64:` and 16 hex digits: the hash of a cubin's
/// bytes that a measurement and a build compare. Not cryptographic: it
/// tells a changed cubin from the measured one, it does not authenticate.
pub fn content_hash(bytes: &[u8]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("fnv1a64:{h:016x}")
}

/// The hash of a cubin that a measurement and a build compare:
/// [`content_hash`] of what it runs (`code_hash`): its sections and symbols
/// by name, less the debug sections, the tables of names and the toolkit's
/// note of the options, with each reference to a symbol by index replaced
/// by the symbol's name. `-lineinfo`, which occ-build compiles with unless
/// told not to, adds sections that name the crate's absolute folder and
/// shifts every symbol index; the hash is the same with and without it, in
/// any folder. Bytes that are not a 64-bit ELF file are hashed whole.
pub fn cubin_hash(bytes: &[u8]) -> String {
    match crate::code_hash::code_bytes(bytes) {
        Some(code) => content_hash(&code),
        None => content_hash(bytes),
    }
}

/// The hash of a candidate set: [`content_hash`] of its block sizes,
/// sorted, as decimal text joined by commas.
pub fn candidates_hash(block_sizes: &[u32]) -> String {
    let mut sizes = block_sizes.to_vec();
    sizes.sort_unstable();
    sizes.dedup();
    let text: Vec<String> = sizes.iter().map(u32::to_string).collect();
    content_hash(text.join(",").as_bytes())
}

/// How a results file is made again: the fix of every message about one.
const AGAIN: &str = "write it again with the tuner (example-app --tune, occ::tune)";

impl Results {
    /// The file's JSON: schema first, pretty, trailing newline.
    pub fn to_json(&self) -> String {
        manifest::to_json_pretty(self)
    }

    /// Parses and checks a results file: its schema, names, and that every
    /// measurement has timings, each block size once, each a finite
    /// positive median.
    pub fn from_json(text: &str, path: &Path) -> Result<Results> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let corrupt = |detail: String| Error::Corrupt {
            path: path.to_path_buf(),
            detail,
        };
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| corrupt(format!("not valid JSON ({e}); {AGAIN}")))?;
        manifest::check_schema(&value, path, RESULTS_SCHEMA, AGAIN)?;
        let results: Results = serde_json::from_value(value)
            .map_err(|e| corrupt(format!("not an occ results file ({e}); {AGAIN}")))?;
        results
            .validate()
            .map_err(|why| corrupt(format!("{why}; {AGAIN}")))?;
        Ok(results)
    }

    /// What a results file read back may not be trusted with, in words
    /// (the fix, to write it again with the tuner, is the reader's to add).
    pub fn validate(&self) -> std::result::Result<(), String> {
        if self.package.is_empty() {
            return Err("names no package".into());
        }
        // A name here reaches the lock, the reports and kernels.rs.
        manifest::writable("the package name", &self.package)?;
        manifest::writable("the device name", &self.device.name)?;
        manifest::writable("the toolkit", &self.toolkit)?;
        if !is_compute_capability(&self.device.compute_capability) {
            return Err(format!(
                "device.compute_capability {:?} is not a compute capability `major.minor` (such as \"9.0\", \
                 as `nvidia-smi --query-gpu=compute_cap --format=csv` prints it)",
                self.device.compute_capability
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        for m in &self.measurements {
            let what = format!(
                "kernel {:?} on {} (bucket {:?})",
                m.kernel, m.arch, m.bucket
            );
            if m.kernel.is_empty() || m.source.is_empty() {
                return Err(format!("{what} has an empty kernel or source name"));
            }
            manifest::writable(&format!("{what}: its kernel"), &m.kernel)?;
            manifest::writable(&format!("{what}: its source"), &m.source)?;
            if !manifest::is_arch_key(&m.arch) {
                return Err(format!("{what}: {:?} is not an arch name", m.arch));
            }
            if m.bucket.is_empty() || m.bucket.chars().any(char::is_control) {
                return Err(format!(
                    "{what}: the bucket must be a non-empty name without control characters"
                ));
            }
            if !seen.insert((&m.kernel, &m.source, &m.arch, &m.bucket)) {
                return Err(format!("{what} is measured twice"));
            }
            if m.timings.is_empty() {
                return Err(format!("{what} has no timings"));
            }
            let mut sizes = std::collections::BTreeSet::new();
            for t in &m.timings {
                if !sizes.insert(t.block_size) || t.block_size == 0 || t.block_size > 1024 {
                    return Err(format!(
                        "{what}: block size {} is out of range or timed twice",
                        t.block_size
                    ));
                }
                let sane = t.median_us.is_finite()
                    && t.median_us > 0.0
                    && t.noise.is_finite()
                    && t.noise >= 0.0
                    && t.runs > 0;
                if !sane {
                    return Err(format!(
                        "{what}: the timing at block size {} is not a positive finite median with runs and a noise ≥ 0",
                        t.block_size
                    ));
                }
            }
            let timed: Vec<u32> = m.timings.iter().map(|t| t.block_size).collect();
            if m.candidates_hash != candidates_hash(&timed) {
                return Err(format!(
                    "{what}: candidates_hash {:?} is not the hash of the block sizes timed ({})",
                    m.candidates_hash,
                    candidates_hash(&timed)
                ));
            }
        }
        Ok(())
    }

    /// The lock's entries for this file's measurements, sorted.
    pub fn to_measured(&self) -> Vec<Measured> {
        let mut out: Vec<Measured> = self
            .measurements
            .iter()
            .filter_map(|m| {
                let mut timings = m.timings.clone();
                timings.sort_by_key(|t| t.block_size);
                let best = fastest(&timings)?.block_size;
                Some(Measured {
                    kernel: m.kernel.clone(),
                    source: m.source.clone(),
                    arch: m.arch.clone(),
                    bucket: m.bucket.clone(),
                    best,
                    device: self.device.name.clone(),
                    compute_capability: self.device.compute_capability.clone(),
                    sm_count: self.device.sm_count,
                    toolkit: self.toolkit.clone(),
                    cubin_hash: m.cubin_hash.clone(),
                    candidates_hash: m.candidates_hash.clone(),
                    max_occupancy: m.max_occupancy,
                    timings,
                })
            })
            .collect();
        sort(&mut out);
        out
    }
}

/// `entries` under the sources of today: `today(entry)` gives the source
/// its kernel is in now when its kernel × arch is still built (the same
/// source, or where its file moved), else `None` and the entry is dropped.
/// Sorted; where a moved file's entry meets one taken at its new place,
/// the one taken there stays.
pub fn rebase(entries: &[Measured], today: impl Fn(&Measured) -> Option<String>) -> Vec<Measured> {
    let mut tagged: Vec<(bool, Measured)> = entries
        .iter()
        .filter_map(|m| {
            let source = today(m)?;
            let moved = source != m.source;
            Some((
                moved,
                Measured {
                    source,
                    ..m.clone()
                },
            ))
        })
        .collect();
    // By key, then unmoved first; dedup keeps the first of a key.
    tagged.sort_by(|(a_moved, a), (b_moved, b)| a.key().cmp(&b.key()).then(a_moved.cmp(b_moved)));
    tagged.dedup_by(|(_, a), (_, b)| a.key() == b.key());
    tagged.into_iter().map(|(_, m)| m).collect()
}

/// Above this spread (median absolute deviation / median) a timing is
/// noisy: `cargo occ tune import` warns, example-app marks it.
pub const NOISY: f64 = 0.05;

/// Sorts a lock's or manifest's measured entries by their key.
pub fn sort(entries: &mut [Measured]) {
    entries.sort_by(|a, b| a.key().cmp(&b.key()));
}

/// Checks entries read back from a lock or manifest: names, each key once,
/// `best` among the timings and the fastest of them, numbers in range.
pub fn validate_entries(entries: &[Measured]) -> std::result::Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for e in entries {
        let what = format!(
            "the measurement of {:?} on {} (bucket {:?})",
            e.kernel, e.arch, e.bucket
        );
        if !seen.insert(e.key()) {
            return Err(format!("{what} is listed twice"));
        }
        for (field, value) in [
            ("kernel", &e.kernel),
            ("source", &e.source),
            ("bucket", &e.bucket),
            ("device", &e.device),
            ("toolkit", &e.toolkit),
        ] {
            manifest::writable(&format!("{what}: its {field}"), value)?;
        }
        if !manifest::is_arch_key(&e.arch) {
            return Err(format!("{what}: {:?} is not an arch name", e.arch));
        }
        if e.timings
            .iter()
            .any(|t| !t.median_us.is_finite() || t.median_us <= 0.0)
        {
            return Err(format!("{what} has a time that is not a positive number"));
        }
        if let Some(t) = e
            .timings
            .iter()
            .find(|t| !(1..=1024).contains(&t.block_size))
        {
            return Err(format!(
                "{what} times a block of {} threads; a block has 1 to 1024",
                t.block_size
            ));
        }
        if e.timings
            .iter()
            .any(|t| t.runs == 0 || !t.noise.is_finite() || t.noise < 0.0)
        {
            return Err(format!(
                "{what} has a timing of no runs or a noise that is not a fraction of 0 or more"
            ));
        }
        if fastest(&e.timings).map(|t| t.block_size) != Some(e.best) {
            return Err(format!(
                "{what}: best = {} is not its fastest timing",
                e.best
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A little-endian ELF64 file of `sections` (name, contents) after
    /// the null section, with its section-name table last.
    fn elf(sections: &[(&str, &[u8])]) -> Vec<u8> {
        let mut names = vec![0u8];
        let mut offsets = Vec::new();
        for (name, _) in sections.iter().chain([(".shstrtab", &[][..])].iter()) {
            offsets.push(names.len() as u32);
            names.extend_from_slice(name.as_bytes());
            names.push(0);
        }
        let mut out = vec![0u8; 64];
        out[..4].copy_from_slice(b"\x7fELF");
        out[4] = 2; // 64-bit
        out[5] = 1; // little-endian
        out[6] = 1; // version
        out[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        out[18..20].copy_from_slice(&190u16.to_le_bytes()); // EM_CUDA
        out[20..24].copy_from_slice(&1u32.to_le_bytes());
        out[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
        out[58..60].copy_from_slice(&64u16.to_le_bytes()); // e_shentsize
        let count = sections.len() + 2;
        out[60..62].copy_from_slice(&(count as u16).to_le_bytes());
        out[62..64].copy_from_slice(&((count - 1) as u16).to_le_bytes());
        let mut placed = Vec::new();
        for (_, data) in sections.iter().copied().chain([("", &names[..])]) {
            placed.push((out.len() as u64, data.len() as u64));
            out.extend_from_slice(data);
        }
        while !out.len().is_multiple_of(8) {
            out.push(0);
        }
        let shoff = out.len() as u64;
        out[40..48].copy_from_slice(&shoff.to_le_bytes());
        out.extend_from_slice(&[0u8; 64]);
        for (i, (offset, size)) in placed.iter().enumerate() {
            let mut h = [0u8; 64];
            h[..4].copy_from_slice(&offsets[i].to_le_bytes());
            let kind: u32 = if i == placed.len() - 1 { 3 } else { 1 };
            h[4..8].copy_from_slice(&kind.to_le_bytes());
            h[24..32].copy_from_slice(&offset.to_le_bytes());
            h[32..40].copy_from_slice(&size.to_le_bytes());
            h[48..56].copy_from_slice(&1u64.to_le_bytes());
            out.extend_from_slice(&h);
        }
        out
    }

    #[test]
    fn no_hash_of_todays_code_is_stale() {
        // A lock from before occ kept cubin hashes: a build from it must
        // not bake the measured block that a build with nvcc would not.
        let r = results("a", &[(128, 2.0), (256, 3.0)]);
        let m = &r.to_measured()[0];
        assert!(matches!(m.staleness(None), Staleness::Stale { .. }));
        assert_eq!(m.staleness(Some(&m.cubin_hash)), Staleness::Current);
    }

    #[test]
    fn a_cubins_hash_is_its_code_not_its_line_table() {
        let code: &[u8] = b"\x01\x02\x03\x04";
        let here = elf(&[(".text.k", code), (".debug_line", b"/home/a/crate/kernels")]);
        let there = elf(&[(".text.k", code), (".debug_line", b"/ci/build/x/kernels")]);
        assert_ne!(here, there);
        assert_eq!(cubin_hash(&here), cubin_hash(&there));
        let relocated = elf(&[
            (".text.k", code),
            (".nv_debug_line_sass", b"x"),
            (".rela.debug_line", b"yy"),
        ]);
        assert_eq!(
            cubin_hash(&relocated),
            cubin_hash(&elf(&[(".text.k", code)]))
        );
        let changed = elf(&[
            (".text.k", b"\x01\x02\x03\x05"),
            (".debug_line", b"/home/a/crate/kernels"),
        ]);
        assert_ne!(cubin_hash(&here), cubin_hash(&changed));
        // Contents cannot move between sections unnoticed.
        let split = elf(&[(".text.k", b"\x01\x02"), (".nv.info", b"\x03\x04")]);
        let joined = elf(&[(".text.k", code), (".nv.info", b"")]);
        assert_ne!(cubin_hash(&split), cubin_hash(&joined));
        // Not an ELF file: the bytes, whole.
        assert_eq!(cubin_hash(b"not a cubin"), content_hash(b"not a cubin"));
    }

    pub(crate) fn results(kernel: &str, times: &[(u32, f64)]) -> Results {
        Results {
            schema: RESULTS_SCHEMA,
            package: "app".into(),
            device: Device {
                name: "NVIDIA H200".into(),
                compute_capability: "9.0".into(),
                sm_count: 132,
                clock_khz: Some(1_980_000),
                memory_clock_khz: None,
            },
            toolkit: "V13.5.37".into(),
            measurements: vec![Measurement {
                kernel: kernel.into(),
                source: "k.cu".into(),
                arch: "sm_80".into(),
                bucket: DEFAULT_BUCKET.into(),
                cubin_hash: content_hash(b"cubin"),
                candidates_hash: candidates_hash(&times.iter().map(|t| t.0).collect::<Vec<_>>()),
                max_occupancy: None,
                timings: times
                    .iter()
                    .map(|&(block_size, median_us)| Timing {
                        block_size,
                        median_us,
                        runs: 20,
                        noise: 0.01,
                    })
                    .collect(),
            }],
        }
    }

    #[test]
    fn results_round_trip_and_bad_files_are_refused_by_name() {
        let r = results("a", &[(512, 3.0), (128, 2.0), (256, 2.5)]);
        let text = r.to_json();
        assert!(text.starts_with("{\n  \"schema\": 1,"), "{text}");
        let back = Results::from_json(&text, Path::new("t.json")).expect("reads");
        assert_eq!(back, r);
        let m = back.to_measured();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].best, 128);
        assert_eq!(
            m[0].timings
                .iter()
                .map(|t| t.block_size)
                .collect::<Vec<_>>(),
            vec![128, 256, 512]
        );
        assert_eq!(m[0].speedup_over(512), Some(1.5));
        validate_entries(&m).expect("valid");

        let mut twice = r.clone();
        twice.measurements[0].timings[1].block_size = 512;
        let err = Results::from_json(&twice.to_json(), Path::new("t.json"))
            .expect_err("512 twice")
            .to_string();
        assert!(err.contains("t.json") && err.contains("512"), "{err}");
        let nan = text.replacen("\"median_us\": 2.0", "\"median_us\": -2.0", 1);
        assert_ne!(nan, text);
        assert!(Results::from_json(&nan, Path::new("t.json")).is_err());
        let newer = text.replacen("\"schema\": 1", "\"schema\": 7", 1);
        assert!(Results::from_json(&newer, Path::new("t.json"))
            .is_err_and(|e| e.to_string().contains("newer occ")));
        assert!(Results::from_json("{", Path::new("t.json")).is_err());
        // The candidate set's hash must be that of the sizes timed.
        let mut other = r.clone();
        other.measurements[0].candidates_hash = candidates_hash(&[128, 256]);
        let err = Results::from_json(&other.to_json(), Path::new("t.json"))
            .expect_err("hash of another set")
            .to_string();
        assert!(err.contains("candidates_hash"), "{err}");
    }

    #[test]
    fn a_name_that_would_break_a_report_is_refused_where_results_are_read() {
        // A device name with a newline broke the report's measured table.
        let mut r = results("a", &[(128, 2.0)]);
        r.device.name = "NVIDIA H200\n| injected | row |".into();
        let err = Results::from_json(&r.to_json(), Path::new("t.json"))
            .expect_err("a newline in the device name")
            .to_string();
        assert!(
            err.contains("the device name \"NVIDIA H200\\n| injected | row |\" holds a control character (U+000A) at byte 11")
                && err.contains("write it again with the tuner")
                && !err.contains('\n'),
            "{err}"
        );
        let mut r = results("a", &[(128, 2.0)]);
        r.measurements[0].source = "k\u{202e}.cu".into();
        let err = Results::from_json(&r.to_json(), Path::new("t.json"))
            .expect_err("a bidi control in the source")
            .to_string();
        assert!(err.contains("(U+202E)"), "{err}");
        // In a lock's measured lines too.
        let mut entries = results("a", &[(128, 2.0)]).to_measured();
        entries[0].device = "H200\r".into();
        assert!(validate_entries(&entries).is_err_and(|e| e.contains("its device")));
    }

    #[test]
    fn a_compute_capability_that_names_no_arch_is_refused() {
        for good in ["9.0", "8.6", "12.1", "10.0"] {
            let mut r = results("a", &[(128, 2.0)]);
            r.device.compute_capability = good.into();
            Results::from_json(&r.to_json(), Path::new("t.json"))
                .unwrap_or_else(|e| panic!("{good} refused: {e}"));
        }
        for bad in [
            "abc", "", "9", "9.", ".0", "90", "9.0.1", "9.10", "09.0", "x9.0", " 9.0",
        ] {
            let mut r = results("a", &[(128, 2.0)]);
            r.device.compute_capability = bad.into();
            let err = Results::from_json(&r.to_json(), Path::new("t.json"))
                .expect_err(bad)
                .to_string();
            assert!(
                err.contains("t.json")
                    && err.contains("compute_capability")
                    && err.contains(&format!("{bad:?}"))
                    && err.matches("write it again with the tuner").count() == 1,
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn rebase_moves_entries_to_todays_source_and_keeps_the_one_taken_there() {
        let old = results("a", &[(128, 2.0), (256, 3.0)]).to_measured()[0].clone();
        let here = Measured {
            source: "kernels/new.cu".into(),
            best: 256,
            timings: old
                .timings
                .iter()
                .map(|t| Timing {
                    median_us: 5.0 - t.median_us,
                    ..*t
                })
                .collect(),
            ..old.clone()
        };
        let moved = rebase(std::slice::from_ref(&old), |_| {
            Some("kernels/new.cu".into())
        });
        assert_eq!(moved.len(), 1);
        assert_eq!(
            (moved[0].source.as_str(), moved[0].best),
            ("kernels/new.cu", 128)
        );
        // An entry of the old place meets one of the new: the new one stays,
        // in either order.
        for entries in [[old.clone(), here.clone()], [here.clone(), old.clone()]] {
            let kept = rebase(&entries, |_| Some("kernels/new.cu".into()));
            assert_eq!(kept, std::slice::from_ref(&here));
        }
        assert!(rebase(&[old], |_| None).is_empty());
    }

    #[test]
    fn ties_go_to_the_larger_block_and_staleness_compares_hashes() {
        let r = results("a", &[(128, 2.0), (256, 2.0), (64, 5.0)]);
        let m = &r.to_measured()[0];
        assert_eq!(m.best, 256);
        assert_eq!(
            m.staleness(Some(&content_hash(b"cubin"))),
            Staleness::Current
        );
        assert!(matches!(
            m.staleness(Some(&content_hash(b"cubin2"))),
            Staleness::Stale { .. }
        ));
        let mut wrong = m.clone();
        wrong.best = 64;
        assert!(validate_entries(&[wrong]).is_err_and(|e| e.contains("best = 64")));
        // The hashes tell inputs apart; order does not matter to the set's.
        assert_ne!(content_hash(b"a"), content_hash(b"b"));
        assert_eq!(
            candidates_hash(&[256, 128]),
            candidates_hash(&[128, 256, 128])
        );
        assert_ne!(candidates_hash(&[128, 256]), candidates_hash(&[128, 512]));
        // FNV-1a's published test vector.
        assert_eq!(content_hash(b"a"), "fnv1a64:af63dc4c8601ec8c");
    }
}
