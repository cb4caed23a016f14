//! The data lifecycle: the retention purge task (the store does the
//! deleting, in bounded batches) and `blockhook backup`.

pub mod backup;

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;

use crate::store::Store;

/// Runs the retention purge every `interval`, the first pass one interval
/// after the start (a conversation is deleted within `interval` of passing
/// its retention either way, and a start is not slowed by a pass).
pub fn spawn_purge(store: Arc<dyn Store>, interval: Duration) -> JoinHandle<()> {
    tokio::spawn(async move {
        let purged = metrics::counter!(crate::telemetry::metrics::PURGED);
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let t0 = Instant::now();
            match store.purge_expired(crate::domain::time::now_ms()).await {
                Ok(0) => {}
                Ok(n) => {
                    purged.increment(n);
                    let s = t0.elapsed().as_secs_f64();
                    tracing::info!(
                        conversations = n,
                        seconds = s,
                        per_s = n as f64 / s.max(1e-6),
                        "retention purge"
                    );
                }
                Err(e) => {
                    tracing::error!(error = %e, "retention purge failed; retried next interval")
                }
            }
        }
    })
}
