//! A build run with a given environment reader instead of the process's:
//! how occ's own tests (and tools) run many builds in one process, each with
//! its own variables, printing nothing.
//!
//! Why two `#[doc(hidden)]` methods on `Build`, and not a public module or a
//! cargo feature. A public module was a second API under the build script's
//! semver (issue 38). A feature (`testing`) would be unified across the
//! build graph, so one crate enabling it enables it for every build script
//! there, and it would be one more thing the manifest promises. These
//! methods are on no documentation page, hidden items are outside the
//! semver promise by convention (cargo-semver-checks skips them), and they
//! take occ-shell's [`Env`], which only a crate that depends on occ-shell
//! itself can make: a build script has no reason to.

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
