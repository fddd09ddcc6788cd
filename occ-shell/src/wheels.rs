//! The pinned nvcc wheels (`occ-shell/toolkit-wheels.txt`), shared by the
//! installers (`cargo occ toolkit install`, `scripts/cuda-toolkit`) and the
//! nvcc-not-found message.
//!
//! A leaf: it imports nothing of the crate.

/// The pinned wheel list (`occ-shell/toolkit-wheels.txt`), shared with
/// `scripts/cuda-toolkit`; read it through [`wheel_sets`].
pub const WHEELS: &str = include_str!("../toolkit-wheels.txt");

/// Wheels installed together into one folder of a toolkit dir.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WheelSet {
    /// The folder below the toolkit dir, e.g. `cu13`.
    pub name: &'static str,
    /// Installed only on request (`--legacy`: ptxas 12.9 and 11.8).
    pub legacy: bool,
    /// pip requirements, each pinned: `nvidia-cuda-nvcc==13.5.37`.
    pub requirements: Vec<&'static str>,
}

impl WheelSet {
    /// What `<set>/.stamp` holds once the set is installed: its pinned
    /// requirements in order, joined by `+` (the rule `scripts/cuda-toolkit`
    /// follows, so either installer sees the other's install as done). A
    /// wheel added to the set, or a new pin, installs the set again.
    pub fn stamp(&self) -> String {
        self.requirements.join("+")
    }
}

/// The wheel sets of [`WHEELS`], in file order: the default set (`cu13`)
/// first, then the legacy ones.
pub fn wheel_sets() -> Vec<WheelSet> {
    let mut sets: Vec<WheelSet> = Vec::new();
    for line in WHEELS.lines() {
        let mut words = line.split_whitespace();
        let (Some(kind), Some(name), Some(req)) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        if kind.starts_with('#') {
            continue;
        }
        match sets.iter_mut().find(|s| s.name == name) {
            Some(set) => set.requirements.push(req),
            None => sets.push(WheelSet {
                name,
                legacy: kind == "legacy",
                requirements: vec![req],
            }),
        }
    }
    sets
}
