//! A store behind its [`Circuit`]: every role of the store it wraps, each
//! call bounded and counted (see [`super::circuit`]). The roles' forwarding
//! is written by their declarations (`store_role!`, [`super::role`]). The background
//! bookkeeping that retries on its own (attempt records, leases given
//! back, the retention purge) is counted and turned away while the circuit
//! is open, but not cut at the bound: it waits for the store as long as it
//! takes.

use std::sync::Arc;

use super::circuit::{Call, Circuit};
use super::*;

pub struct Guarded<S> {
    /// The store itself (what the roles' forwarding calls).
    pub(super) inner: S,
    circuit: Arc<Circuit>,
}

impl<S: Store> Guarded<S> {
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            circuit: Arc::new(Circuit::new()),
        }
    }

    fn through<'a, T: Send + 'a>(
        &'a self,
        call: Call,
        f: BoxFut<'a, StoreResult<T>>,
    ) -> BoxFut<'a, StoreResult<T>> {
        Box::pin(self.circuit.run(call, || self.inner.probe(), f))
    }

    /// A request's read.
    pub(super) fn read<'a, T: Send + 'a>(
        &'a self,
        f: BoxFut<'a, StoreResult<T>>,
    ) -> BoxFut<'a, StoreResult<T>> {
        self.through(Call::Read, f)
    }

    /// A request's write.
    pub(super) fn write<'a, T: Send + 'a>(
        &'a self,
        f: BoxFut<'a, StoreResult<T>>,
    ) -> BoxFut<'a, StoreResult<T>> {
        self.through(Call::Write, f)
    }

    /// Bookkeeping that retries by itself.
    pub(super) fn bg<'a, T: Send + 'a>(
        &'a self,
        f: BoxFut<'a, StoreResult<T>>,
    ) -> BoxFut<'a, StoreResult<T>> {
        self.through(Call::Background, f)
    }
}

impl<S: Store> Store for Guarded<S> {
    fn shared(&self) -> bool {
        self.inner.shared()
    }
    fn probe(&self) -> StoreFut<'_, ()> {
        self.inner.probe()
    }
}
