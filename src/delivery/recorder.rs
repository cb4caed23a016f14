//! Batched recording of attempt outcomes: every outcome finished since the
//! last write goes into one store transaction.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::store::{AttemptRecord, Store};

const BATCH: usize = 512;
/// How long a short batch waits for more outcomes: outcomes arrive one by
/// one when clicks do, and each write is a transaction (docs/notes/DECISIONS.md).
const LINGER: Duration = Duration::from_millis(5);
/// Write tries left for the last batch once shutdown began.
const FINAL_TRIES: u32 = 5;

/// Records outcomes until `stop`, then drains what is left and returns.
pub async fn run(
    store: Arc<dyn Store>,
    mut rx: mpsc::UnboundedReceiver<AttemptRecord>,
    stop: CancellationToken,
) {
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        tokio::select! {
            biased;
            n = rx.recv_many(&mut batch, BATCH) => {
                if n == 0 {
                    return;
                }
                if n < BATCH {
                    tokio::select! {
                        _ = tokio::time::sleep(LINGER) => {}
                        _ = stop.cancelled() => {}
                    }
                    while batch.len() < BATCH && let Ok(r) = rx.try_recv() {
                        batch.push(r);
                    }
                }
                write(&*store, std::mem::take(&mut batch), &stop).await;
            }
            _ = stop.cancelled() => {
                while let Ok(r) = rx.try_recv() {
                    batch.push(r);
                }
                if !batch.is_empty() {
                    write(&*store, batch, &stop).await;
                }
                return;
            }
        }
    }
}

/// Writes one batch, retrying a failing store (forever while running; a few
/// times on shutdown, after which the leases bring the deliveries back).
async fn write(store: &dyn Store, records: Vec<AttemptRecord>, stop: &CancellationToken) {
    let mut tries = 0u32;
    loop {
        match store.record_attempts(records.clone()).await {
            Ok(()) => return,
            Err(e) => {
                tries += 1;
                tracing::error!(error = %e, tries, "recording delivery attempts failed; retrying");
                if stop.is_cancelled() && tries >= FINAL_TRIES {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200 * u64::from(tries.min(25)))).await;
            }
        }
    }
}
