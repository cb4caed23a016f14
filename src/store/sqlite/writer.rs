//! The writer thread and the WAL syncer: jobs queued to one connection,
//! committed in batches, answered once their batch is on disk.

use super::*;

pub(super) type Done = Box<dyn FnOnce(Result<(), Failed>) + Send>;

/// Why a batch did not commit (or reach the disk), as its jobs are
/// answered: the file's trouble (a full disk, a read-only file) is
/// `Unavailable`, a 503 the client retries; anything else a fault of the
/// store.
#[derive(Debug, Clone)]
pub(super) struct Failed {
    msg: String,
    unavailable: bool,
}

impl Failed {
    fn of(e: &rusqlite::Error) -> Self {
        Self {
            msg: e.to_string(),
            unavailable: super::out_of_service(e),
        }
    }

    fn error(self) -> StoreError {
        if self.unavailable {
            StoreError::Unavailable(self.msg)
        } else {
            StoreError::Backend(self.msg)
        }
    }
}
/// Runs a job in the open transaction (`None`: no transaction could be
/// opened, the job fails unrun); `true` beside its answer when it failed
/// part-way with no savepoint to undo it, so the batch must roll back.
pub(super) type Run = Box<dyn FnOnce(Option<&Connection>) -> Ran + Send>;

/// What a job left for the writer: its answer, whether it poisoned the
/// batch, and the event it queued for delivery (offered to the hot queue
/// once its batch is durable).
pub(super) struct Ran {
    done: Done,
    poisoned: bool,
    /// It failed for the file's trouble (then so does its batch).
    unavailable: bool,
    hot: Option<Claimed>,
}

/// A committed batch on its way to the disk: its answers and the events it
/// queued.
pub(super) struct Synced {
    done: Vec<Done>,
    hot: Vec<Claimed>,
    /// The deliveries it created to endpoints other than the default.
    routed: writer_cache::Routed,
}

/// A write and whether its commit must reach the disk before it is
/// answered (accepted work) or may be flushed by a later commit (delivery
/// bookkeeping, which a crash can only make repeat, never lose).
pub(super) struct Job {
    durable: bool,
    run: Run,
}

impl SqliteStore {
    /// Runs `f` inside the next group-committed transaction; resolves after
    /// the commit.
    pub(super) async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        self.write_with(true, true, f, |_| None).await
    }

    /// As [`Self::write`], for a job that decides before it writes: it
    /// returns an error other than `Backend` only before its first change,
    /// so it needs no savepoint of its own (each costs a copy of every page
    /// the job touches); a `Backend` error rolls back its whole batch.
    /// `durable: false` is for bookkeeping whose loss in a power cut only
    /// repeats work: committed without waiting for fsync unless it shares a
    /// batch with durable work.
    pub(super) async fn write_decided<T, F>(&self, durable: bool, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        self.write_with(durable, false, f, |_| None).await
    }

    /// A write (with a savepoint or decided) that may queue an event:
    /// `hot` takes it from the job's answer, and the syncer offers the
    /// events of a whole batch to the dispatcher at once when the batch is
    /// on disk (`|_| None` when it queues none).
    pub(super) async fn write_with<T, F>(
        &self,
        durable: bool,
        savepoint: bool,
        f: F,
        hot: fn(&mut T) -> Option<Claimed>,
    ) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<StoreResult<T>>();
        let run: Run = Box::new(move |conn: Option<&Connection>| {
            let mut poisoned = false;
            if savepoint {
                // Any of these jobs may change a chatbot or a conversation;
                // the decided ones (a click, attempt records) say so
                // themselves when they do.
                writer_cache::clear_conversations();
            }
            let result = match conn {
                None => Err(StoreError::Backend(
                    "no write transaction could be opened".into(),
                )),
                Some(conn) if savepoint => match exec(conn, "SAVEPOINT job") {
                    Ok(()) => {
                        let r = f(conn);
                        let end = if r.is_ok() {
                            exec(conn, "RELEASE job")
                        } else {
                            writer_cache::clear();
                            exec(conn, "ROLLBACK TO job").and_then(|()| exec(conn, "RELEASE job"))
                        };
                        match end {
                            Ok(()) => r,
                            Err(e) => {
                                poisoned = true;
                                Err(StoreError::from(e))
                            }
                        }
                    }
                    Err(e) => Err(StoreError::from(e)),
                },
                Some(conn) => {
                    let r = f(conn);
                    poisoned =
                        matches!(r, Err(StoreError::Backend(_) | StoreError::Unavailable(_)));
                    r
                }
            };
            let unavailable = matches!(result, Err(StoreError::Unavailable(_)));
            let mut result = result;
            let queued = result.as_mut().ok().and_then(hot);
            let done: Done = Box::new(move |commit: Result<(), Failed>| {
                let out = match commit {
                    Ok(()) => result,
                    Err(e) => Err(e.error()),
                };
                let _ = tx.send(out);
            });
            Ran {
                done,
                poisoned,
                unavailable,
                hot: queued,
            }
        });
        self.writer
            .send(Job { durable, run })
            .map_err(|_| StoreError::Backend("writer stopped".into()))?;
        rx.await
            .map_err(|_| StoreError::Backend("writer dropped the job".into()))?
    }

    /// Runs a read on a pooled connection (WAL readers do not block the writer).
    pub(super) fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> StoreResult<T> {
        let conn = match self.readers.lock().pop() {
            Some(c) => c,
            None => open(&self.path)?,
        };
        let r = f(&conn).map_err(StoreError::from);
        let mut pool = self.readers.lock();
        if pool.len() < 8 {
            pool.push(conn);
        }
        r
    }
}

pub(super) fn writer_loop(
    conn: Connection,
    rx: crossbeam_channel::Receiver<Job>,
    sync: Sender<Synced>,
    claims: &Mutex<claims::Claims>,
) {
    writer_cache::enable();
    let mut done: Vec<Done> = Vec::with_capacity(MAX_BATCH);
    let mut hot: Vec<Claimed> = Vec::new();
    // Changes committed by another connection (an operator's SQL, a test)
    // show as a new `data_version`: the caches are emptied then.
    let mut seen_version: Option<i64> = None;
    loop {
        let first = match rx.recv() {
            Ok(j) => j,
            Err(_) => return,
        };
        if let Err(e) = exec(&conn, "BEGIN IMMEDIATE") {
            ((first.run)(None).done)(Err(Failed::of(&e)));
            continue;
        }
        let version = conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)))
            .ok();
        if version.is_none() || version != seen_version {
            writer_cache::clear();
            seen_version = version;
        }
        let mut durable = first.durable;
        let mut next = Some(first);
        let mut poisoned = false;
        let mut unavailable = false;
        while let Some(job) = next.take() {
            durable |= job.durable;
            let ran = (job.run)(Some(&conn));
            done.push(ran.done);
            hot.extend(ran.hot);
            poisoned = ran.poisoned;
            unavailable = ran.unavailable;
            if done.len() >= MAX_BATCH || poisoned {
                break;
            }
            // The batch commits as soon as nothing more is waiting, even
            // while the syncer is busy: the syncer's next fdatasync covers
            // every commit made during its last one, and a batch held open
            // until the disk is idle measured slower (its commit's WAL
            // writes then sit between two syncs, with the CPU waiting).
            next = rx.try_recv().ok();
        }
        // Held back from scans of the table before they can see them: the
        // syncer offers them once they are on disk.
        if !poisoned && !hot.is_empty() {
            claims
                .lock()
                .reserve(hot.iter().map(|c| c.event_id.as_str()));
        }
        let commit = if poisoned {
            Err(Failed {
                msg: "a write failed part-way; its batch was rolled back".to_string(),
                unavailable,
            })
        } else {
            let t0 = std::time::Instant::now();
            let r = exec(&conn, "COMMIT").map_err(|e| Failed::of(&e));
            crate::telemetry::metrics::store_commit(t0.elapsed());
            r
        };
        if commit.is_err() {
            writer_cache::clear();
            let _ = conn.execute_batch("ROLLBACK");
            // Its events were rolled back with it.
            if !poisoned && !hot.is_empty() {
                claims
                    .lock()
                    .unreserve(hot.iter().map(|c| c.event_id.as_str()));
            }
            hot.clear();
        }
        // Deliveries are made only by durable jobs (event inserts).
        let mut routed = writer_cache::take_routed();
        if commit.is_err() {
            routed = writer_cache::Routed::default();
        }
        if commit.is_ok() && (durable || !hot.is_empty() || routed.any) {
            // Answered once the WAL reached the disk; the next batch runs
            // meanwhile.
            let batch = Synced {
                done: std::mem::replace(&mut done, Vec::with_capacity(MAX_BATCH)),
                hot: std::mem::take(&mut hot),
                routed,
            };
            if let Err(crossbeam_channel::SendError(batch)) = sync.send(batch) {
                claims
                    .lock()
                    .unreserve(batch.hot.iter().map(|c| c.event_id.as_str()));
                for d in batch.done {
                    d(Err(Failed {
                        msg: "the WAL syncer stopped".into(),
                        unavailable: false,
                    }));
                }
            }
        } else {
            for d in done.drain(..) {
                d(commit.clone());
            }
        }
    }
}

/// The WAL syncer: makes committed batches durable with one `fdatasync` of
/// the WAL file for everything committed since the last, hands their
/// events to the dispatcher (one wake-up for all), then answers them.
/// Commits run with `synchronous=NORMAL` (no sync of their own), so the
/// writer starts the next batch while this one reaches the disk — the same
/// guarantee as `synchronous=FULL` for every answered write, without the
/// writer waiting for the disk.
pub(super) fn syncer_loop(
    wal_path: std::path::PathBuf,
    rx: crossbeam_channel::Receiver<Synced>,
    claims: &Mutex<claims::Claims>,
    signals: &dyn Signals,
) {
    let mut wal: Option<std::fs::File> = None;
    while let Ok(first) = rx.recv() {
        let mut batches = vec![first];
        while let Ok(more) = rx.try_recv() {
            batches.push(more);
        }
        let synced = match &wal {
            Some(f) => f.sync_data(),
            None => std::fs::OpenOptions::new()
                .write(true)
                .open(&wal_path)
                .and_then(|f| {
                    f.sync_data()?;
                    wal = Some(f);
                    Ok(())
                }),
        }
        .map_err(|e| Failed {
            msg: format!("syncing the WAL failed: {e}"),
            unavailable: true,
        });
        match &synced {
            // A click that was not answered is not delivered from memory;
            // should its event have reached the disk after all, a scan of
            // the table finds it.
            Err(e) => {
                tracing::error!(error = %e.msg, "writes were committed but may not be on disk");
                let mut cl = claims.lock();
                cl.deliveries.rescan();
                cl.unreserve(
                    batches
                        .iter()
                        .flat_map(|b| b.hot.iter().map(|c| c.event_id.as_str())),
                );
            }
            Ok(()) => {
                if batches.iter().any(|b| b.routed.any) {
                    let heads = batches.iter_mut().flat_map(|b| b.routed.heads.drain(..));
                    claims.lock().deliveries.add(heads);
                    signals.deliveries_due();
                }
                let mut hot = batches.iter_mut().flat_map(|b| b.hot.drain(..)).peekable();
                if hot.peek().is_some() {
                    claims.lock().offer(hot);
                    signals.events_due();
                }
            }
        }
        for d in batches.into_iter().flat_map(|b| b.done) {
            d(synced.clone());
        }
    }
}
