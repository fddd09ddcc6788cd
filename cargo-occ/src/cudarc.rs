//! `cargo occ toolkit doctor`'s cudarc line: would cudarc's build script
//! stop the build of the crate here?
//!
//! occ names no CUDA version of cudarc's (so that a user's own wins), and
//! asks for `cuda-version-from-build-system`. cudarc 0.19's build script
//! then takes, in order: `CUDARC_CUDA_VERSION`, a `cuda-XXXXX` feature of
//! any crate of the build, the `release X.Y` of `nvcc --version` (the nvcc
//! on `PATH`; `CUDA_HOME` is not asked), and with no nvcc there its newest
//! bindings (`fallback-latest`). It panics on a version it has no
//! bindings for ("Unsupported cuda toolkit version: `13.5`"). [`judge`]
//! repeats that rule over what `cargo metadata` says of the crate's cudarc
//! (its enabled features, and the `cuda-XXXXX` features its version has);
//! the rest of this module gathers those facts.

use anyhow::{bail, Context, Result};
use occ_shell::process::{Cmd, Programs, Real};
use std::path::Path;

/// One cudarc of the crate's dependency graph, as `cargo metadata` has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cudarc {
    /// Its version, `0.19.10`.
    pub version: String,
    /// The features the build enables.
    pub enabled: Vec<String>,
    /// The CUDA versions it has bindings for (its `cuda-XXXXX` features).
    pub known: Vec<(u32, u32)>,
}

/// What cudarc's build script would do: a one-line account, and the fix
/// when it would stop the build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// What it would use, or why it would stop.
    pub value: String,
    /// What to do, when it would stop.
    pub fix: Option<String>,
}

/// The CUDA version a `cuda-XXXXX` feature names (`cuda-13040` → 13.4).
fn feature_version(feature: &str) -> Option<(u32, u32)> {
    let digits = feature.strip_prefix("cuda-")?;
    if digits.len() != 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let major = digits[..2].parse().ok()?;
    let minor = digits[2..4].parse().ok()?;
    Some((major, minor))
}

/// The feature of a CUDA version (13.4 → `cuda-13040`).
fn feature_name((major, minor): (u32, u32)) -> String {
    format!("cuda-{major}0{minor}0")
}

/// `release 13.5` of `nvcc --version`'s output, as cudarc reads it.
pub fn nvcc_release(version_output: &str) -> Option<String> {
    let (_, rest) = version_output.split_once("release ")?;
    Some(rest.split([',', ' ', '\n']).next()?.to_string())
}

impl Cudarc {
    /// From a package of `cargo metadata`'s `packages` and its node of
    /// `resolve.nodes`.
    fn from_metadata(package: &serde_json::Value, node: &serde_json::Value) -> Option<Cudarc> {
        let mut known: Vec<(u32, u32)> = package["features"]
            .as_object()?
            .keys()
            .filter_map(|f| feature_version(f))
            .collect();
        known.sort_unstable();
        let enabled = node["features"]
            .as_array()?
            .iter()
            .filter_map(|f| Some(f.as_str()?.to_string()))
            .collect();
        Some(Cudarc {
            version: package["version"].as_str()?.to_string(),
            enabled,
            known,
        })
    }

    /// The `[dependencies]` line that names a version: the newest cudarc
    /// has at or below `nvcc` (its newest without one).
    fn fix_line(&self, nvcc: Option<&str>) -> String {
        let wanted = nvcc.and_then(|v| {
            let (major, minor) = v.split_once('.')?;
            Some((major.parse::<u32>().ok()?, minor.parse::<u32>().ok()?))
        });
        let pick = self
            .known
            .iter()
            .rev()
            .find(|v| wanted.is_none_or(|w| **v <= w))
            .or(self.known.last())
            .copied()
            .unwrap_or((12, 8));
        let mut parts = self.version.split('.');
        let major = parts.next().unwrap_or("0");
        let requirement = match major {
            "0" => format!("0.{}", parts.next().unwrap_or("0")),
            _ => major.to_string(),
        };
        format!(
            "cudarc = {{ version = \"{requirement}\", default-features = false, features = [\"{}\"] }}",
            feature_name(pick)
        )
    }
}

/// What cudarc's build script would do, given the crate's cudarc, the
/// value of `CUDARC_CUDA_VERSION` and the release of the nvcc on `PATH`
/// (`None`: no nvcc there, or one that does not run). Long because it
/// follows cudarc's build script's own order of choices, one branch each.
pub fn judge(cudarc: &Cudarc, env: Option<&str>, nvcc: Option<&str>) -> Verdict {
    let known = |v: &(u32, u32)| cudarc.known.contains(v);
    let ok = |value: String| Verdict { value, fix: None };
    let stop = |why: String, fix: String| Verdict {
        value: format!("{} {why}", cudarc.version),
        fix: Some(fix),
    };
    let add_line = || {
        format!(
            "name a CUDA version: add to the crate's [dependencies] (or add the feature to its cudarc line)\n{}",
            cudarc.fix_line(nvcc)
        )
    };
    if let Some(env) = env {
        let named = cudarc
            .known
            .iter()
            .find(|v| feature_name(**v) == format!("cuda-{env}"));
        return match named {
            Some((major, minor)) => ok(format!(
                "{}, CUDA {major}.{minor} (CUDARC_CUDA_VERSION)",
                cudarc.version
            )),
            None => stop(
                format!("stops the build: it has no bindings for CUDARC_CUDA_VERSION={env}"),
                format!("unset CUDARC_CUDA_VERSION, or {}", add_line()),
            ),
        };
    }
    let features: Vec<(u32, u32)> = cudarc
        .enabled
        .iter()
        .filter_map(|f| feature_version(f))
        .filter(known)
        .collect();
    match features[..] {
        [(major, minor)] => {
            return ok(format!(
                "{}, CUDA {major}.{minor} (feature {})",
                cudarc.version,
                feature_name((major, minor))
            ))
        }
        [_, _, ..] => {
            let names: Vec<String> = features.iter().map(|v| feature_name(*v)).collect();
            return stop(
                format!("does not compile: two CUDA versions ({})", names.join(", ")),
                "keep one `cuda-XXXXX` feature of cudarc in the whole build".into(),
            );
        }
        [] => {}
    }
    if !cudarc
        .enabled
        .iter()
        .any(|f| f == "cuda-version-from-build-system")
    {
        return stop(
            "stops the build: no CUDA version feature".into(),
            add_line(),
        );
    }
    match nvcc {
        Some(release) => {
            let version = release
                .split_once('.')
                .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
            match version.filter(known) {
                Some(_) => ok(format!(
                    "{}, CUDA {release} (from the nvcc on PATH, at each build: no version feature)",
                    cudarc.version
                )),
                None => stop(
                    format!(
                        "stops the build: no version feature, so it asks the nvcc on PATH, and has no bindings for its {release} (\"Unsupported cuda toolkit version\")"
                    ),
                    add_line(),
                ),
            }
        }
        None if cudarc.enabled.iter().any(|f| f == "fallback-latest") => {
            let newest = cudarc.known.last().copied().unwrap_or((0, 0));
            ok(format!(
                "{}, CUDA {}.{} (its newest: no version feature, no nvcc on PATH)",
                cudarc.version, newest.0, newest.1
            ))
        }
        None => stop(
            "stops the build: no version feature, and no nvcc on PATH to ask".into(),
            add_line(),
        ),
    }
}

/// Every cudarc of the crate at `manifest_path` (default: the current
/// folder's), from `cargo metadata --offline` (doctor downloads nothing).
/// The graph is the host's (`--filter-platform`): without it cargo wants
/// the sources of every platform's dependencies (`windows-link`, ...),
/// which a Linux build never downloaded, and offline it fails.
pub fn of_crate(manifest_path: Option<&Path>) -> Result<Vec<Cudarc>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Cmd::new(cargo);
    cmd.args(["metadata", "--format-version", "1", "--offline"]);
    if let Some(host) = host_triple() {
        cmd.arg("--filter-platform").arg(host);
    }
    if let Some(path) = manifest_path {
        cmd.arg("--manifest-path").arg(path);
    }
    let out = Real
        .output(&cmd)
        .context("cannot run `cargo metadata`; is cargo on PATH?")?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!(
            "`cargo metadata --offline` failed: {}",
            stderr
                .lines()
                .find(|l| l.starts_with("error"))
                .unwrap_or(stderr.trim())
        );
    }
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("cannot read `cargo metadata` output")?;
    let empty = Vec::new();
    let nodes = meta["resolve"]["nodes"].as_array().unwrap_or(&empty);
    Ok(meta["packages"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .filter(|p| p["name"] == "cudarc")
        .filter_map(|p| {
            let node = nodes.iter().find(|n| n["id"] == p["id"])?;
            Cudarc::from_metadata(p, node)
        })
        .collect())
}

/// The host's target triple, as `rustc -vV` names it; `None` when rustc
/// does not run.
fn host_triple() -> Option<String> {
    let out = Real.output(Cmd::new("rustc").arg("-vV")).ok()?;
    if !out.status.success() {
        return None;
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .map(|h| h.trim().to_string())
}

/// The release of the `nvcc` that cudarc's build script runs: the first on
/// `PATH`; `None` when there is none or it does not run.
pub fn nvcc_on_path() -> Option<String> {
    let path = std::env::var_os("PATH")?;
    let nvcc = std::env::split_paths(&path)
        .map(|dir| dir.join("nvcc"))
        .find(|p| p.is_file())?;
    let out = Real.output(Cmd::new(nvcc).arg("--version")).ok()?;
    if !out.status.success() {
        return None;
    }
    nvcc_release(&String::from_utf8_lossy(&out.stdout))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// cudarc 0.19.10's versions: 11.4..11.8, 12.0..12.6, 12.8, 12.9, 13.0..13.4.
    fn cudarc(enabled: &[&str]) -> Cudarc {
        let mut known = vec![(12, 8), (12, 9)];
        known.extend((4..=8).map(|m| (11, m)));
        known.extend((0..=6).map(|m| (12, m)));
        known.extend((0..=4).map(|m| (13, m)));
        known.sort_unstable();
        Cudarc {
            version: "0.19.10".into(),
            enabled: enabled.iter().map(|f| f.to_string()).collect(),
            known,
        }
    }

    /// occ's own features of cudarc.
    const OCC: &[&str] = &[
        "std",
        "driver",
        "fallback-dynamic-loading",
        "cuda-version-from-build-system",
        "fallback-latest",
    ];

    const FIX_13_4: &str =
        "cudarc = { version = \"0.19\", default-features = false, features = [\"cuda-13040\"] }";

    #[test]
    fn occs_features_and_nvcc_13_5_on_path_stop_the_build_and_print_the_line() {
        let v = judge(&cudarc(OCC), None, Some("13.5"));
        assert!(v.value.contains("stops the build"), "{v:?}");
        assert!(v.value.contains("13.5"), "{v:?}");
        let fix = v.fix.expect("a fix");
        assert_eq!(fix.lines().last(), Some(FIX_13_4), "{fix}");
    }

    #[test]
    fn a_version_feature_or_the_variable_wins_over_nvcc() {
        let mut features = OCC.to_vec();
        features.push("cuda-13040");
        let v = judge(&cudarc(&features), None, Some("13.5"));
        assert_eq!(v.fix, None, "{v:?}");
        assert!(v.value.contains("CUDA 13.4 (feature cuda-13040)"), "{v:?}");
        let v = judge(&cudarc(OCC), Some("12080"), Some("13.5"));
        assert_eq!(v.fix, None, "{v:?}");
        let v = judge(&cudarc(OCC), Some("13050"), None);
        assert!(v
            .fix
            .expect("a fix")
            .starts_with("unset CUDARC_CUDA_VERSION"));
    }

    #[test]
    fn a_known_nvcc_or_none_at_all_builds() {
        assert_eq!(judge(&cudarc(OCC), None, Some("12.9")).fix, None);
        let v = judge(&cudarc(OCC), None, None);
        assert_eq!(v.fix, None, "{v:?}");
        assert!(v.value.contains("CUDA 13.4"), "{v:?}");
        // Without fallback-latest, no nvcc stops it.
        let v = judge(
            &cudarc(&["driver", "cuda-version-from-build-system"]),
            None,
            None,
        );
        assert!(v.fix.is_some(), "{v:?}");
    }

    #[test]
    fn the_fix_names_the_newest_version_at_or_below_nvcc() {
        let c = cudarc(OCC);
        assert!(judge(&c, None, Some("12.7"))
            .fix
            .unwrap()
            .ends_with("[\"cuda-12060\"] }"));
        assert!(judge(&c, None, Some("11.2"))
            .fix
            .unwrap()
            .ends_with("[\"cuda-13040\"] }"));
        assert!(judge(&c, None, Some("garbage"))
            .fix
            .unwrap()
            .ends_with("[\"cuda-13040\"] }"));
    }

    #[test]
    fn two_versions_and_no_version_source_are_named() {
        let v = judge(&cudarc(&["cuda-12080", "cuda-13000"]), None, None);
        assert!(v.value.contains("cuda-12080, cuda-13000"), "{v:?}");
        let v = judge(&cudarc(&["driver"]), None, Some("12.8"));
        assert!(v.value.contains("no CUDA version feature"), "{v:?}");
        assert_eq!(v.fix.unwrap().lines().last(), Some(
            "cudarc = { version = \"0.19\", default-features = false, features = [\"cuda-12080\"] }"
        ));
    }

    #[test]
    fn nvcc_release_reads_what_cudarc_reads() {
        let out = "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2026 NVIDIA Corporation\nBuilt on Mon_Oct_12_19:25:48_PDT_2026\nCuda compilation tools, release 13.5, V13.5.37\nBuild cuda_13.5.r13.5/compiler.39125733_0\n";
        assert_eq!(nvcc_release(out).as_deref(), Some("13.5"));
        assert_eq!(nvcc_release("nothing"), None);
        assert_eq!(feature_version("cuda-13040"), Some((13, 4)));
        assert_eq!(feature_version("cuda-version-from-build-system"), None);
    }
}
