//! The circuit around the store (§15): a store that does not answer costs a
//! request at most [`BOUND`], and once it has failed [`OPEN_AFTER`] times in
//! a row, requests are answered `Unavailable` at once, without waiting on
//! it, until a probe finds it back.
//!
//! Closed: every call goes through, bounded by [`BOUND`] (a request's) or
//! not (bookkeeping that retries by itself); a call that fails
//! `Unavailable` (or runs out of time) counts, a write that succeeds resets
//! the count (a read that succeeds does not: on a full disk reads still
//! work). Open: calls fail at once for [`OPEN_FOR`]. Then half open: the
//! first call runs the store's own probe (a write where reads and writes
//! can fail apart) before its own, the others still fail at once; the
//! probe's success closes the circuit, its failure opens it again.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, Ordering};
use std::time::Duration;

use super::{StoreError, StoreResult};

/// The longest a request's call waits on a store that is not answering
/// before it is answered `Unavailable`: within §15's 2 s, with room for the
/// HTTP round trip. A store that answers other calls meanwhile is busy,
/// not gone: the call waits on, in steps of [`BOUND`], up to [`BUSY`].
pub const BOUND: Duration = Duration::from_millis(1500);

/// The longest a request's call waits on a store that keeps answering
/// other calls (lock waits, a machine under load).
pub const BUSY: Duration = Duration::from_secs(30);

/// Failures in a row that open the circuit: one slow statement under load
/// does not turn the service away.
pub const OPEN_AFTER: u32 = 3;

/// How long an open circuit answers at once before it lets a probe through.
pub const OPEN_FOR: Duration = Duration::from_millis(500);

/// What a call does to the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// A request's read: bounded; its success does not close the circuit.
    Read,
    /// A request's write: bounded.
    Write,
    /// Bookkeeping that retries on its own (attempt records, leases, the
    /// purge): a write, not bounded.
    Background,
}

/// The state of the circuit, shared by every caller of one store.
#[derive(Debug, Default)]
pub struct Circuit {
    failures: AtomicU32,
    /// While open: until when (ms since the epoch); 0 when closed.
    open_until: AtomicI64,
    /// A probe is under way (half open).
    probing: AtomicBool,
    /// When a call last had an answer of the store (ms since the epoch).
    answered_at: AtomicI64,
}

fn now_ms() -> i64 {
    crate::domain::time::now_ms()
}

fn refused() -> StoreError {
    StoreError::Unavailable("the store did not answer just now (circuit open)".into())
}

impl Circuit {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether calls are being turned away now.
    pub fn is_open(&self) -> bool {
        self.open_until.load(Ordering::Acquire) != 0
    }

    /// Runs `f` for at most [`BOUND`], or on while the store answers
    /// other calls (up to [`BUSY`]).
    async fn bounded<T>(&self, f: impl Future<Output = StoreResult<T>>) -> StoreResult<T> {
        let started = now_ms();
        let mut f = std::pin::pin!(f);
        let mut waited = Duration::ZERO;
        loop {
            if let Ok(r) = tokio::time::timeout(BOUND, &mut f).await {
                return r;
            }
            waited += BOUND;
            let answered = self.answered_at.load(Ordering::Acquire);
            let busy = answered > started && now_ms() - answered < BOUND.as_millis() as i64;
            if !busy || waited >= BUSY {
                return Err(StoreError::Unavailable(format!(
                    "the store did not answer within {} ms",
                    waited.as_millis()
                )));
            }
        }
    }

    fn close(&self) {
        self.failures.store(0, Ordering::Release);
        if self.open_until.swap(0, Ordering::AcqRel) != 0 {
            tracing::info!("the store answers again; circuit closed");
        }
    }

    fn open(&self, failures: u32) {
        let was = self
            .open_until
            .swap(now_ms() + OPEN_FOR.as_millis() as i64, Ordering::AcqRel);
        if was == 0 {
            tracing::warn!(failures, "the store does not answer; circuit open");
        }
    }

    fn failed(&self) {
        let n = self.failures.fetch_add(1, Ordering::AcqRel) + 1;
        if n >= OPEN_AFTER {
            self.open(n);
        }
    }

    /// Runs `f` through the circuit; `probe` checks the store when the
    /// circuit is half open and this call is the first to come.
    pub async fn run<T, P>(
        &self,
        call: Call,
        probe: impl FnOnce() -> P,
        f: impl Future<Output = StoreResult<T>>,
    ) -> StoreResult<T>
    where
        P: Future<Output = StoreResult<()>>,
    {
        let until = self.open_until.load(Ordering::Acquire);
        if until != 0 {
            if now_ms() < until {
                return Err(refused());
            }
            if self
                .probing
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return Err(refused());
            }
            // A probe whose caller goes away ends with it.
            let _probing = Probing(&self.probing);
            match self.bounded(probe()).await {
                Ok(()) => self.close(),
                Err(e) => {
                    self.open(self.failures.load(Ordering::Acquire));
                    return Err(e);
                }
            }
        }
        let r = match call {
            Call::Read | Call::Write => self.bounded(f).await,
            Call::Background => f.await,
        };
        if !matches!(r, Err(StoreError::Unavailable(_))) {
            self.answered_at.store(now_ms(), Ordering::Release);
        }
        match &r {
            Err(StoreError::Unavailable(_)) => self.failed(),
            Err(_) | Ok(_) if call == Call::Read => {}
            // Any answer to a write, a refusal included, is the store
            // answering.
            _ => self.close(),
        }
        r
    }
}

/// Ends the probe when dropped.
struct Probing<'a>(&'a AtomicBool);

impl Drop for Probing<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn down() -> StoreResult<()> {
        Err(StoreError::Unavailable("down".into()))
    }

    async fn up() -> StoreResult<()> {
        Ok(())
    }

    async fn open_one() -> Circuit {
        let c = Circuit::new();
        for k in 0..OPEN_AFTER {
            assert!(!c.is_open(), "closed after {k} failures");
            assert!(c.run(Call::Write, up, down()).await.is_err());
        }
        assert!(c.is_open());
        c
    }

    #[tokio::test]
    async fn opens_after_failures_in_a_row_and_closes_on_a_probes_success() {
        let c = open_one().await;
        // Turned away without being run.
        let r = c.run(Call::Write, up, async { Ok(1) }).await;
        assert!(matches!(r, Err(StoreError::Unavailable(_))), "{r:?}");
        tokio::time::sleep(OPEN_FOR + Duration::from_millis(20)).await;
        // The probe runs, and its success closes the circuit.
        assert_eq!(c.run(Call::Read, up, async { Ok(2) }).await.ok(), Some(2));
        assert!(!c.is_open());
    }

    #[tokio::test]
    async fn a_failed_probe_opens_it_again() {
        let c = open_one().await;
        tokio::time::sleep(OPEN_FOR + Duration::from_millis(20)).await;
        let r = c.run(Call::Read, down, async { Ok(1) }).await;
        assert!(r.is_err(), "the probe failed, the call was not run");
        let r = c.run(Call::Read, up, async { Ok(1) }).await;
        assert!(r.is_err(), "open again after the failed probe");
    }

    #[tokio::test]
    async fn a_refusal_is_an_answer_and_a_read_closes_nothing() {
        let c = Circuit::new();
        for _ in 0..OPEN_AFTER {
            let _ = c
                .run(Call::Write, up, async {
                    Err::<(), _>(StoreError::NotFound)
                })
                .await;
        }
        assert!(!c.is_open());
        // Writes fail, reads work (a full disk): the failures add up.
        for _ in 0..OPEN_AFTER {
            let _ = c.run(Call::Write, up, down()).await;
            assert!(c.run(Call::Read, up, up()).await.is_ok() || c.is_open());
        }
        assert!(c.is_open());
    }

    #[tokio::test]
    async fn a_call_that_hangs_is_cut_at_the_bound() {
        let c = Circuit::new();
        let r = c
            .run(Call::Write, up, std::future::pending::<StoreResult<()>>())
            .await;
        assert!(matches!(r, Err(StoreError::Unavailable(_))), "{r:?}");
    }
}
