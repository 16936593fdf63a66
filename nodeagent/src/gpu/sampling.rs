//! Health samples off the heartbeat's path: a task samples every GPU on a
//! blocking thread, one sample at a time, and publishes the latest. A driver
//! call that hangs (NVML can) delays the next sample, never a heartbeat: the
//! heartbeat carries the newest sample there is.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::{GpuBackend, GpuSample};

/// A sample slower than this is logged: heartbeats then carry older readings.
const SLOW_SAMPLE: Duration = Duration::from_secs(2);

/// Samples `backend` every `every` for as long as the receiver lives.
pub fn sample_periodically(
    backend: Arc<dyn GpuBackend>,
    every: Duration,
) -> watch::Receiver<Vec<GpuSample>> {
    let (publish, latest) = watch::channel(Vec::new());
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let backend = Arc::clone(&backend);
            let started = tokio::time::Instant::now();
            let Ok(sample) = tokio::task::spawn_blocking(move || backend.sample()).await else {
                tracing::error!("GPU health sampling panicked; heartbeats carry the last sample");
                continue;
            };
            let took = started.elapsed();
            if took > SLOW_SAMPLE {
                tracing::warn!(
                    took_ms = took.as_millis() as u64,
                    "sampling GPU health was slow; heartbeats went on with the previous sample"
                );
            }
            if publish.send(sample).is_err() {
                return;
            }
        }
    });
    latest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::SimulatedGpus;
    use corral_state::mig::MigLayout;

    #[tokio::test]
    async fn the_latest_sample_is_published() {
        let dir = tempfile::tempdir().expect("dir");
        let gpus = SimulatedGpus::new(
            2,
            "h100",
            &MigLayout::default(),
            dir.path().join("control.sock"),
        )
        .expect("simulated GPUs");
        let mut latest = sample_periodically(Arc::new(gpus), Duration::from_millis(10));
        latest.changed().await.expect("a sample");
        let indices: Vec<u32> = latest.borrow().iter().map(|s| s.index).collect();
        assert_eq!(indices, vec![0, 1]);
    }
}
