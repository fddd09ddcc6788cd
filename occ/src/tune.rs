//! Choosing a launch by measuring it: the selection logic, independent of
//! how times are taken.
//!
//! A [`Timer`] times one candidate block size through a launch closure
//! (and a reset hook for kernels that write their inputs, as Triton's
//! `reset_to_zero`); [`tune`] times every candidate and picks the fastest
//! (ties to the larger block, as the occupancy search keeps the larger
//! block on a tie). [`Recorded`] is a timer that replays recorded times,
//! for tests of the selection: it measures nothing. [`RuntimeCache`] is the
//! run-time mode: the choice is made on the first launch of a kernel × arch
//! × bucket and kept in memory. [`results_json`] writes what was measured
//! as the results file `cargo occ tune import` merges into occ.lock.
//!
//! ```
//! use occ::tune::{tune, Recorded};
//! let timer = Recorded::new([(128, 4.0), (256, 3.0), (512, 3.5)]);
//! let mut launched = Vec::new();
//! let t = tune(&timer, &[128, 256, 512], |b| { launched.push(b); Ok(()) }, || Ok(())).unwrap();
//! assert_eq!(t.best, 256);
//! assert_eq!(launched, [128, 256, 512]);
//! ```

use std::collections::HashMap;
use std::sync::Mutex;

/// One candidate's time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Timing {
    /// Threads per block.
    pub block_size: u32,
    /// The median time of one launch, microseconds.
    pub median_us: f64,
    /// Timed runs (after warm-up).
    pub runs: u32,
    /// The spread of the runs: median absolute deviation / median.
    pub noise: f64,
}

impl Timing {
    /// Whether the runs spread more than `limit` (a fraction of the median):
    /// the time is not to be trusted.
    pub fn is_noisy(&self, limit: f64) -> bool {
        self.noise.is_nan() || self.noise > limit
    }
}

/// The median and the noise (median absolute deviation / median) of
/// samples; `None` for no samples or a sample that is not a finite time.
pub fn summarize(samples: &[f64]) -> Option<(f64, f64)> {
    if samples.is_empty() || samples.iter().any(|s| !s.is_finite() || *s < 0.0) {
        return None;
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        let n = v.len();
        if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        }
    };
    let mut v = samples.to_vec();
    let m = median(&mut v);
    let mut dev: Vec<f64> = samples.iter().map(|s| (s - m).abs()).collect();
    let mad = median(&mut dev);
    Some((m, if m > 0.0 { mad / m } else { 0.0 }))
}

/// Times one candidate: launches `launch(block_size)` as often as it
/// needs, calling `reset` before each launch.
pub trait Timer {
    /// What a launch, a reset or the timer itself can fail with.
    type Error;

    /// The candidate's time.
    fn time(
        &self,
        block_size: u32,
        launch: &mut dyn FnMut(u32) -> Result<(), Self::Error>,
        reset: &mut dyn FnMut() -> Result<(), Self::Error>,
    ) -> Result<Timing, Self::Error>;
}

/// A timer that replays recorded times (block size, median µs): for tests
/// of the selection logic, not a measurement. Each candidate is launched
/// once (after a reset), so the flow is the real one.
#[derive(Debug, Clone)]
pub struct Recorded {
    times: Vec<(u32, f64)>,
}

/// A [`Recorded`] timer's error: a candidate it has no time for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRecorded(pub u32);

impl std::fmt::Display for NotRecorded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no recorded time for block size {}", self.0)
    }
}

impl std::error::Error for NotRecorded {}

impl Recorded {
    /// Replays `times`.
    pub fn new(times: impl IntoIterator<Item = (u32, f64)>) -> Self {
        Recorded {
            times: times.into_iter().collect(),
        }
    }
}

impl Timer for Recorded {
    type Error = NotRecorded;

    fn time(
        &self,
        block_size: u32,
        launch: &mut dyn FnMut(u32) -> Result<(), NotRecorded>,
        reset: &mut dyn FnMut() -> Result<(), NotRecorded>,
    ) -> Result<Timing, NotRecorded> {
        let &(_, median_us) = self
            .times
            .iter()
            .find(|(b, _)| *b == block_size)
            .ok_or(NotRecorded(block_size))?;
        reset()?;
        launch(block_size)?;
        Ok(Timing {
            block_size,
            median_us,
            runs: 1,
            noise: 0.0,
        })
    }
}

/// What [`tune`] chose.
#[derive(Debug, Clone, PartialEq)]
pub struct Tuned {
    /// The fastest block size.
    pub best: u32,
    /// Every candidate's time, in the order timed.
    pub timings: Vec<Timing>,
}

impl Tuned {
    /// The time at `block_size`, if it was timed.
    pub fn time_at(&self, block_size: u32) -> Option<f64> {
        self.timings
            .iter()
            .find(|t| t.block_size == block_size)
            .map(|t| t.median_us)
    }
}

/// Why [`tune`] chose nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum TuneError<E> {
    /// No candidates were given.
    NoCandidates,
    /// The timer, a launch or the reset failed at a block size.
    Timer {
        /// The candidate.
        block_size: u32,
        /// The error.
        error: E,
    },
    /// The timer gave a time that is not one: not a finite positive
    /// median, or a noise that is not finite (a results file could not
    /// hold it).
    BadTiming {
        /// The candidate.
        block_size: u32,
        /// The median it gave, microseconds.
        median_us: f64,
        /// The noise it gave.
        noise: f64,
    },
}

impl<E: std::fmt::Display> std::fmt::Display for TuneError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TuneError::NoCandidates => write!(
                f,
                "no candidate block sizes to time; `cargo occ tune --plan` lists them"
            ),
            TuneError::Timer { block_size, error } => {
                write!(f, "timing block size {block_size} failed: {error}")
            }
            TuneError::BadTiming {
                block_size,
                median_us,
                noise,
            } => write!(
                f,
                "the timer gave block size {block_size} a median of {median_us} us (noise {noise}): not a time; is the timer recording the launches?"
            ),
        }
    }
}

impl<E: std::fmt::Debug + std::fmt::Display> std::error::Error for TuneError<E> {}

/// Times each candidate with `timer` and picks the fastest (ties to the
/// larger block). `launch(block_size)` launches the kernel on the user's
/// real arguments; `reset` restores what the kernel writes.
pub fn tune<T: Timer>(
    timer: &T,
    candidates: &[u32],
    mut launch: impl FnMut(u32) -> Result<(), T::Error>,
    mut reset: impl FnMut() -> Result<(), T::Error>,
) -> Result<Tuned, TuneError<T::Error>> {
    let mut timings = Vec::with_capacity(candidates.len());
    for &block_size in candidates {
        let t = timer
            .time(block_size, &mut launch, &mut reset)
            .map_err(|error| TuneError::Timer { block_size, error })?;
        if !(t.median_us.is_finite() && t.median_us > 0.0 && t.noise.is_finite() && t.noise >= 0.0)
        {
            return Err(TuneError::BadTiming {
                block_size,
                median_us: t.median_us,
                noise: t.noise,
            });
        }
        timings.push(t);
    }
    let best = timings
        .iter()
        .min_by(|a, b| {
            a.median_us
                .total_cmp(&b.median_us)
                .then(b.block_size.cmp(&a.block_size))
        })
        .map(|t| t.block_size)
        .ok_or(TuneError::NoCandidates)?;
    Ok(Tuned { best, timings })
}

/// The key of a run-time choice: kernel symbol, arch, bucket.
pub type Key = (String, String, String);

/// The run-time mode: each kernel × arch × bucket is tuned on its first
/// launch and the choice kept in memory for the process.
#[derive(Debug, Default)]
pub struct RuntimeCache {
    chosen: Mutex<HashMap<Key, u32>>,
}

impl RuntimeCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The cached choice for a key, if any.
    pub fn get(&self, kernel: &str, arch: &str, bucket: &str) -> Option<u32> {
        let key = (kernel.to_string(), arch.to_string(), bucket.to_string());
        self.chosen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&key)
            .copied()
    }

    /// The cached choice, or `tune`'s on first use (then cached). A failed
    /// tuning caches nothing. The lock is not held while `tune` runs, so
    /// two threads that miss the same key at once both tune it (the later
    /// choice stays); a thread that panicked while holding the lock leaves
    /// the cache usable.
    pub fn get_or_tune<E>(
        &self,
        kernel: &str,
        arch: &str,
        bucket: &str,
        tune: impl FnOnce() -> Result<Tuned, E>,
    ) -> Result<u32, E> {
        if let Some(b) = self.get(kernel, arch, bucket) {
            return Ok(b);
        }
        let best = tune()?.best;
        self.chosen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((kernel.into(), arch.into(), bucket.into()), best);
        Ok(best)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fastest_wins_ties_to_the_larger_block_and_resets_come_first() {
        let timer = Recorded::new([(64, 3.0), (128, 2.0), (256, 2.0), (1024, 9.0)]);
        let log = std::cell::RefCell::new(Vec::new());
        let t = tune(
            &timer,
            &[64, 128, 256, 1024],
            |b| {
                log.borrow_mut().push(format!("launch {b}"));
                Ok(())
            },
            || {
                log.borrow_mut().push("reset".into());
                Ok(())
            },
        )
        .expect("tunes");
        assert_eq!(t.best, 256);
        assert_eq!(t.time_at(1024), Some(9.0));
        assert_eq!(log.borrow()[..2], ["reset".to_string(), "launch 64".into()]);
        assert_eq!(log.borrow().len(), 8);
        // A candidate without a time, or none at all, is an error.
        let e = tune(&timer, &[64, 512], |_| Ok(()), || Ok(())).expect_err("512");
        assert_eq!(
            e,
            TuneError::Timer {
                block_size: 512,
                error: NotRecorded(512)
            }
        );
        assert_eq!(
            tune(&timer, &[], |_| Ok(()), || Ok(())),
            Err(TuneError::NoCandidates)
        );
        // A time that is not one is refused, not written as 0.
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let timer = Recorded::new([(128, 2.0), (256, bad)]);
            let e = tune(&timer, &[128, 256], |_| Ok(()), || Ok(())).expect_err("bad");
            assert!(
                matches!(
                    e,
                    TuneError::BadTiming {
                        block_size: 256,
                        ..
                    }
                ),
                "{bad}: {e:?}"
            );
        }
    }

    #[test]
    fn summaries_and_noise() {
        assert_eq!(summarize(&[3.0, 1.0, 2.0]), Some((2.0, 0.5)));
        let (m, noise) = summarize(&[10.0, 10.0, 10.0, 11.0]).expect("samples");
        assert_eq!((m, noise), (10.0, 0.0));
        assert_eq!(summarize(&[]), None);
        assert_eq!(summarize(&[1.0, f64::NAN]), None);
        let t = Timing {
            block_size: 32,
            median_us: 1.0,
            runs: 10,
            noise: 0.2,
        };
        assert!(t.is_noisy(0.1) && !t.is_noisy(0.25));
        assert!(Timing {
            noise: f64::NAN,
            ..t
        }
        .is_noisy(1.0));
    }

    #[test]
    fn the_runtime_cache_tunes_once_per_key() {
        let cache = RuntimeCache::new();
        let timer = Recorded::new([(128, 2.0), (256, 1.0)]);
        let mut runs = 0;
        for _ in 0..3 {
            let b = cache
                .get_or_tune("k", "sm_90", "n=1M", || {
                    runs += 1;
                    tune(&timer, &[128, 256], |_| Ok(()), || Ok(()))
                })
                .expect("tunes");
            assert_eq!(b, 256);
        }
        assert_eq!(runs, 1);
        // Another bucket or arch is another key.
        assert_eq!(cache.get("k", "sm_80", "n=1M"), None);
        let other = Recorded::new([(128, 1.0), (256, 2.0)]);
        let b = cache
            .get_or_tune("k", "sm_90", "n=1K", || {
                tune(&other, &[128, 256], |_| Ok(()), || Ok(()))
            })
            .expect("tunes");
        assert_eq!(b, 128);
        // A failure caches nothing.
        let e: Result<u32, TuneError<NotRecorded>> =
            cache.get_or_tune("j", "sm_90", "x", || Err(TuneError::NoCandidates));
        assert!(e.is_err());
        assert_eq!(cache.get("j", "sm_90", "x"), None);
    }
}

/// The device of a results file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// The device's name (`NVIDIA H200`).
    pub name: String,
    /// Compute capability, major and minor.
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// The SM clock, kHz, when the driver reports it.
    pub clock_khz: Option<u32>,
}

/// One kernel × arch × bucket of a results file: what was timed and on
/// which code.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// The kernel's symbol.
    pub kernel: String,
    /// Its source, relative to the crate.
    pub source: String,
    /// The arch of the code that ran (`sm_90`).
    pub arch: String,
    /// The problem-size bucket (`n=1M`).
    pub bucket: String,
    /// The hash of the cubin that ran (`fnv1a64:…`, as the build's manifest records it).
    pub cubin_hash: String,
    /// The hash of the block sizes timed (`occ_model::schema::measured::candidates_hash`;
    /// `cargo occ tune --plan` prints it for the set it lists). `cargo occ
    /// tune import` refuses a file whose hash is not that of its timings.
    pub candidates_hash: String,
    /// The max-occupancy block of the site (the model's choice under its
    /// options), which `cargo occ report` gives the speed-up over; `None`
    /// when the tuner does not know it.
    pub max_occupancy: Option<u32>,
    /// What [`tune`] measured.
    pub tuned: Tuned,
}

/// The results file (schema 1) that `cargo occ tune import` reads, as
/// JSON text with a trailing newline.
pub fn results_json(
    package: &str,
    device: &Device,
    toolkit: &str,
    measurements: &[Measurement],
) -> String {
    fn s(text: &str) -> String {
        let mut out = String::from("\"");
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }
    // Not a number is `null`, which the import refuses: never a time of 0
    // or a noise of 0 that would pass for a measurement. (`tune` gives
    // none; a hand-made `Tuned` might.)
    fn num(v: f64) -> String {
        if v.is_finite() {
            format!("{v:?}")
        } else {
            "null".into()
        }
    }
    let (major, minor) = device.compute_capability;
    let clock = device
        .clock_khz
        .map_or(String::new(), |c| format!(", \"clock_khz\": {c}"));
    let ms: Vec<String> = measurements
        .iter()
        .map(|m| {
            let timings: Vec<String> = m
                .tuned
                .timings
                .iter()
                .map(|t| {
                    format!(
                        "{{\"block_size\": {}, \"median_us\": {}, \"runs\": {}, \"noise\": {}}}",
                        t.block_size,
                        num(t.median_us),
                        t.runs,
                        num(t.noise)
                    )
                })
                .collect();
            format!(
                "    {{\"kernel\": {}, \"source\": {}, \"arch\": {}, \"bucket\": {}, \"cubin_hash\": {}, \"candidates_hash\": {}{}, \"timings\": [{}]}}",
                s(&m.kernel),
                s(&m.source),
                s(&m.arch),
                s(&m.bucket),
                s(&m.cubin_hash),
                s(&m.candidates_hash),
                m.max_occupancy
                    .map_or(String::new(), |b| format!(", \"max_occupancy\": {b}")),
                timings.join(", ")
            )
        })
        .collect();
    format!(
        "{{\n  \"schema\": 1,\n  \"package\": {},\n  \"device\": {{\"name\": {}, \"compute_capability\": \"{major}.{minor}\", \"sm_count\": {}{clock}}},\n  \"toolkit\": {},\n  \"measurements\": [\n{}\n  ]\n}}\n",
        s(package),
        s(&device.name),
        device.sm_count,
        s(toolkit),
        ms.join(",\n")
    )
}
