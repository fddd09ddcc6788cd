//! A build run with a given environment reader instead of the process's:
//! how occ's own tests (and tools) run many builds in one process, each with
//! its own variables, printing nothing.
//!
//! Why two `#[doc(hidden)]` methods behind the feature `internal-test-env`.
//! They take occ-shell's [`Env`], and with them in every build occ-shell
//! would be part of occ-build's public API: a type a build script can
//! name, and a semver hazard each time occ-shell changes. A public module
//! was a second API under the build script's semver; process environment
//! variables instead of a reader would not do either, as tests run many
//! builds in one process, and the replay of recorded nvcc runs
//! (`Env::with_programs`) is no variable. So the door exists only where the
//! feature is on: occ's own test crates (`tests`, `tests/oracle`,
//! cargo-occ's tests), none of them published or a dependency of anyone.
//! Cargo unifies features, so a build graph holding one of those crates
//! gets the methods in every occ-build of that graph; no user's graph
//! does. The feature's name says it is no API, and the methods are hidden
//! from the docs as before.

use crate::builder::Build;
use crate::pipeline::Report;
use occ_model::model::arch::Target;
use occ_shell::Env;

impl Build {
    /// [`Build::try_compile`] with `env` for the environment: prints
    /// nothing; the directives are in the report or the error.
    #[doc(hidden)]
    pub fn try_compile_with(&self, env: &Env) -> crate::Result<Report> {
        let (result, directives) = self.run_with(env);
        result.map_err(|e| crate::Error::new(e, directives))
    }

    /// [`Build::resolved_archs`] with `env` for the environment; prints
    /// nothing (the variables read are in [`Env::read_vars`]).
    #[doc(hidden)]
    pub fn resolved_archs_with(&self, env: &Env) -> crate::Result<Vec<Target>> {
        Ok(crate::stage::inputs::targets(self, env)?)
    }
}
