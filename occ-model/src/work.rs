//! A count of the steps of the loops that grow with a build (rows, kernels,
//! findings, alerts), for the tests that keep every table and report
//! linear: `step` adds to a per-thread count under `cfg(test)` and is
//! nothing in a build, and [`counted`] gives what a call stepped. A test
//! compares the count with the rows it rendered (at 1,000 and at 10,000
//! rows the count per row is the same), so a loop made quadratic again
//! fails it at once, with no clock in the test (the speed targets are
//! BENCHMARKS.md's, measured by `occ-model/benches/report.rs`).

#[cfg(test)]
thread_local! {
    static STEPS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// `n` steps of a loop whose length grows with the build.
#[inline(always)]
pub(crate) fn step(n: usize) {
    #[cfg(test)]
    STEPS.with(|s| s.set(s.get() + n as u64));
    #[cfg(not(test))]
    let _ = n;
}

/// `f`'s result and the steps it took on this thread.
#[cfg(test)]
pub(crate) fn counted<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = STEPS.with(std::cell::Cell::get);
    let r = f();
    (r, STEPS.with(std::cell::Cell::get) - before)
}
