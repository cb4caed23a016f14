//! `blockhook backup <file>`: a consistent copy of a SQLite store while the
//! server runs, through SQLite's online backup API.
//!
//! The copy is of one snapshot: a read transaction is opened on the source
//! before the first page is copied and held to the last, so every step
//! reads the same committed state (WAL readers never block the writer, and
//! a snapshot held open keeps the backup from restarting when the server
//! commits meanwhile). The copy is written to `<file>.partial`, synced, and
//! renamed into place only when complete.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Args;
use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

/// Pages copied per step (4 MiB of 4 KiB pages) between progress lines.
const PAGES_PER_STEP: i32 = 1024;

#[derive(Debug, Clone, Args)]
pub struct BackupArgs {
    /// Where to write the copy (must not exist yet).
    pub file: PathBuf,
    /// The store to copy: `sqlite://path.db`.
    #[arg(
        long,
        env = "BLOCKHOOK_DATABASE",
        default_value = "sqlite://blockhook.db"
    )]
    pub database: String,
}

/// Exit codes: 0 done, 64 usage (not a SQLite URL), 66 no such store, 73
/// the copy cannot be created, 74 a failure while copying.
pub fn run(a: BackupArgs) -> i32 {
    let Some(src) = a.database.strip_prefix("sqlite://") else {
        eprintln!(
            "blockhook backup: --database must be sqlite://…; back up PostgreSQL with pg_dump (see README)"
        );
        return 64;
    };
    if !Path::new(src).exists() {
        eprintln!("blockhook backup: no store at {src}");
        return 66;
    }
    if a.file.exists() {
        eprintln!(
            "blockhook backup: {} exists; choose a new file",
            a.file.display()
        );
        return 73;
    }
    let partial = PathBuf::from(format!("{}.partial", a.file.display()));
    let _ = std::fs::remove_file(&partial);
    match copy(src, &partial, &a.file) {
        Ok(pages) => {
            eprintln!(
                "blockhook backup: {} pages of {src} copied to {}",
                pages,
                a.file.display()
            );
            0
        }
        Err((code, e)) => {
            let _ = std::fs::remove_file(&partial);
            eprintln!("blockhook backup: {e}");
            code
        }
    }
}

fn copy(src: &str, partial: &Path, file: &Path) -> Result<i32, (i32, String)> {
    let io = |e: rusqlite::Error| (74, e.to_string());
    let from = Connection::open_with_flags(
        src,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| (66, format!("cannot open {src}: {e}")))?;
    from.busy_timeout(Duration::from_secs(10)).map_err(io)?;
    let mut to = Connection::open(partial)
        .map_err(|e| (73, format!("cannot create {}: {e}", partial.display())))?;
    // The snapshot: everything committed before this point, nothing after.
    from.execute_batch("BEGIN DEFERRED; SELECT count(*) FROM sqlite_schema;")
        .map_err(io)?;
    let tty = std::io::stderr().is_terminal();
    let pages = {
        let backup = Backup::new(&from, &mut to).map_err(io)?;
        loop {
            match backup.step(PAGES_PER_STEP).map_err(io)? {
                StepResult::Done => break,
                StepResult::More => {}
                // Transient: the destination or source lock is held.
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
            if tty {
                let p = backup.progress();
                let done = p.pagecount - p.remaining;
                let pct = 100.0 * done as f64 / p.pagecount.max(1) as f64;
                eprint!("\rbackup: {pct:5.1}% ({done}/{} pages)", p.pagecount);
                let _ = std::io::stderr().flush();
            }
        }
        if tty {
            eprintln!();
        }
        backup.progress().pagecount
    };
    from.execute_batch("COMMIT").map_err(io)?;
    drop(from);
    to.close().map_err(|(_, e)| io(e))?;
    std::fs::File::open(partial)
        .and_then(|f| f.sync_all())
        .map_err(|e| (74, format!("cannot sync {}: {e}", partial.display())))?;
    std::fs::rename(partial, file)
        .map_err(|e| (73, format!("cannot create {}: {e}", file.display())))?;
    Ok(pages)
}
