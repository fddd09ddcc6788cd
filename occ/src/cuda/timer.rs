//! The CUDA-events [`Timer`](crate::tune::Timer): warm-up launches, then
//! each timed launch between two events recorded on the stream (the reset
//! hook runs before the start event, outside the time), the median of the
//! runs and their noise (median absolute deviation / median).

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
        let mut samples = Vec::with_capacity(self.runs as usize);
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
            let ms = start
                .elapsed_ms(&end)
                .map_err(device("cuEventElapsedTime"))?;
            samples.push(f64::from(ms) * 1000.0);
        }
        let (median_us, noise) = summarize(&samples).unwrap_or((0.0, 0.0));
        Ok(Timing {
            block_size,
            median_us,
            runs: self.runs,
            noise,
        })
    }
}
