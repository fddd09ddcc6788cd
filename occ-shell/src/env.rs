//! The one reader of environment variables.
//!
//! Every variable read through [`Env`] is remembered, so that the build
//! script prints `cargo::rerun-if-env-changed` for each one and no read is
//! forgotten (a raw `std::env::var` is banned by `clippy.toml`).

use crate::process::{Programs, Real};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::sync::Arc;

/// Reads environment variables and remembers which were read; carries the
/// [`Programs`] the build starts its programs through (the processes
/// themselves unless a test gave others), so that a build has one
/// injection point for the outside world.
#[derive(Debug, Default)]
pub struct Env {
    read: RefCell<BTreeSet<String>>,
    overrides: Vec<(String, Option<OsString>)>,
    programs: Option<Arc<dyn Programs>>,
}

impl Env {
    /// A reader of the process environment.
    pub fn new() -> Self {
        Self::default()
    }

    /// A reader that sees `vars` in place of the process environment for
    /// those names (`None` = unset); used by tests.
    pub fn with_overrides(vars: Vec<(String, Option<OsString>)>) -> Self {
        Env {
            read: RefCell::default(),
            overrides: vars,
            programs: None,
        }
    }

    /// This reader, with the build's programs run by `programs` instead of
    /// as processes (a replay of recorded outputs, in tests).
    pub fn with_programs(mut self, programs: Arc<dyn Programs>) -> Self {
        self.programs = Some(programs);
        self
    }

    /// What runs the build's programs ([`crate::process::Real`] unless
    /// [`Env::with_programs`] said otherwise).
    pub fn programs(&self) -> Arc<dyn Programs> {
        self.programs.clone().unwrap_or_else(|| Arc::new(Real))
    }

    /// The variable as an `OsString`, if set.
    pub fn var_os(&self, name: &str) -> Option<OsString> {
        self.read.borrow_mut().insert(name.to_string());
        if let Some((_, value)) = self.overrides.iter().find(|(n, _)| n == name) {
            return value.clone();
        }
        #[allow(clippy::disallowed_methods)]
        std::env::var_os(name)
    }

    /// The variable as a string, if set, valid UTF-8 and not empty.
    pub fn var(&self, name: &str) -> Option<String> {
        self.var_os(name)
            .and_then(|v| v.into_string().ok())
            .filter(|v| !v.trim().is_empty())
    }

    /// Whether the variable is set to a true value (`1`, `true`, `yes`).
    pub fn flag(&self, name: &str) -> bool {
        self.var(name).is_some_and(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        })
    }

    /// Every variable read so far, sorted.
    pub fn read_vars(&self) -> Vec<String> {
        self.read.borrow().iter().cloned().collect()
    }
}

/// Whether `CI` says this is a CI run (set, non-empty, not `false`/`0`).
pub fn is_ci(env: &Env) -> bool {
    env.var("CI").is_some_and(|v| {
        !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "" | "0" | "false" | "no" | "off"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_is_read_like_ci_systems_set_it() {
        let env = |v: Option<&str>| Env::with_overrides(vec![("CI".into(), v.map(OsString::from))]);
        assert!(is_ci(&env(Some("true"))));
        assert!(is_ci(&env(Some("1"))));
        assert!(is_ci(&env(Some("woodpecker"))));
        assert!(!is_ci(&env(Some("false"))));
        assert!(!is_ci(&env(Some("0"))));
        assert!(!is_ci(&env(Some(""))));
        assert!(!is_ci(&env(None)));
    }
}
