//! The CUDA-events [`Timer`](crate::tune::Timer): warm-up launches, then
//! each timed launch between two events recorded on the stream (the reset
//! hook runs before the start event, outside the time; every run is queued
//! before the first is read, so the stream does not idle between them), the
//! median of the runs and their noise (median absolute deviation / median).

use super::{CudaStream, Error};
use crate::tune::{summarize, Timer, Timing};
use cudarc::driver::sys::CUevent_flags;
use std::sync::Arc;

/// Times launches with CUDA events on one stream.
#[derive(Debug, Clone)]
pub struct EventTimer {
    stream: Arc<CudaStream>,
    warmup: u32,
    runs: u32,
}

impl EventTimer {
    /// 3 warm-up launches and 20 timed runs per candidate on `stream`.
    pub fn new(stream: Arc<CudaStream>) -> Self {
        EventTimer {
            stream,
            warmup: 3,
            runs: 20,
        }
    }

    /// Sets the warm-up launches and the timed runs (at least 1).
    pub fn with_runs(mut self, warmup: u32, runs: u32) -> Self {
        self.warmup = warmup;
        self.runs = runs.max(1);
        self
    }
}

fn device(what: &'static str) -> impl Fn(super::DriverError) -> Error {
    move |error| Error::Device { what, error }
}

impl Timer for EventTimer {
    type Error = Error;

    fn time(
        &self,
        block_size: u32,
        launch: &mut dyn FnMut(u32) -> Result<(), Error>,
        reset: &mut dyn FnMut() -> Result<(), Error>,
    ) -> Result<Timing, Error> {
        for _ in 0..self.warmup {
            reset()?;
            launch(block_size)?;
        }
        self.stream
            .synchronize()
            .map_err(device("synchronizing the stream"))?;
        // Every run's events are recorded before any is read: reading one
        // waits for it, which would leave the stream idle before the next
        // run, and the time from its start event to the kernel would then
        // include the host's launch. Queued, the GPU goes from one run to
        // the next.
        let mut events = Vec::with_capacity(self.runs as usize);
        for _ in 0..self.runs {
            reset()?;
            let start = self
                .stream
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(device("cuEventRecord"))?;
            launch(block_size)?;
            let end = self
                .stream
                .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(device("cuEventRecord"))?;
            events.push((start, end));
        }
        self.stream
            .synchronize()
            .map_err(device("synchronizing the stream"))?;
        let mut samples = Vec::with_capacity(events.len());
        for (start, end) in &events {
            let ms = start
                .elapsed_ms(end)
                .map_err(device("cuEventElapsedTime"))?;
            samples.push(f64::from(ms) * 1000.0);
        }
        // No usable sample: NaN, which `tune` refuses with the block size.
        let (median_us, noise) = summarize(&samples).unwrap_or((f64::NAN, f64::NAN));
        Ok(Timing {
            block_size,
            median_us,
            runs: self.runs,
            noise,
        })
    }
}
