//! SQLite on a full disk: a small tmpfs mounted for the test (CI runs the
//! tests as root, which may mount one), its room taken by a filler file.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::*;

/// A tmpfs of `size` on a fresh directory, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Tmpfs {
        let dir = tempfile::tempdir().expect("tempdir");
        let st = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount");
        assert!(
            st.success(),
            "mounting a tmpfs for the full-disk test needs root (scripts/test runs as root in CI)"
        );
        Tmpfs { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Takes every free byte of the file system at `dir`; the filler's path.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).expect("filler");
    for chunk in [1 << 16, 4096, 512, 1] {
        let buf = vec![0u8; chunk];
        loop {
            match f.write(&buf) {
                Ok(n) if n > 0 => {}
                Ok(_) => break,
                Err(e) if e.kind() == std::io::ErrorKind::StorageFull => break,
                Err(e) => panic!("filling the disk: {e}"),
            }
        }
    }
    path
}

/// A message large enough that a few of them outgrow the WAL's slack.
fn large_message() -> Value {
    let text: String = "x".repeat(4000);
    let metadata: serde_json::Map<String, Value> = (0..40)
        .map(|i| (format!("k{i}"), Value::String("y".repeat(1000))))
        .collect();
    serde_json::json!({"text": text, "metadata": metadata})
}

/// The disk under the SQLite file fills up while clicks and messages come
/// in: each write is answered within 2 s, 2xx or 503 `store_unavailable`
/// with `Retry-After` (never a 500), `/readyz` says 503; once room is made
/// the service is ready again on its own, and every accepted click is
/// delivered once, no refused one ever.
#[actix_web::test]
async fn sqlite_on_a_full_disk_answers_503_and_resumes_when_room_is_made() {
    let fs = Tmpfs::mount("24m");
    let db = fs.path().join("blockhook.db").display().to_string();
    let app = spawn_app_with(|c| c.database = Database::Sqlite(db)).await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let ids = messages(&app, &bot, &conv, 80).await;
    let (mut accepted, mut refused) = (HashSet::new(), HashSet::new());
    for id in &ids[..5] {
        let a = answered(app.click(&conv, id, "b1", "approve")).await;
        assert_eq!(a.status, 200, "{}", a.body);
        accepted.insert(id.clone());
    }

    let filler = fill(fs.path());
    let (mut in_a_row, mut slowest, mut next) = (0, Duration::ZERO, 5);
    let big = large_message();
    while in_a_row < 3 {
        assert!(next < 70, "the full disk never refused a write");
        let id = &ids[next];
        next += 1;
        let a = answered(app.click(&conv, id, "b1", "approve")).await;
        match a.status {
            200 => {
                accepted.insert(id.clone());
                in_a_row = 0;
            }
            _ => {
                store_unavailable(&a, "a click on a full disk");
                slowest = slowest.max(a.took);
                refused.insert(id.clone());
                in_a_row += 1;
            }
        }
        let m = answered(app.post(
            &format!("/api/v1/conversations/{}/messages", conv.id),
            &bot.api_key,
            &big,
        ))
        .await;
        if m.status != 201 {
            store_unavailable(&m, "a message on a full disk");
            slowest = slowest.max(m.took);
        }
    }
    store_unavailable(&get_status(&app, "/readyz").await, "/readyz");
    assert_eq!(get_status(&app, "/healthz").await.status, 200);

    std::fs::remove_file(filler).expect("room made");
    let recovered = ready_again(&app, Duration::from_secs(10)).await;
    for id in &ids[70..] {
        let a = answered(app.click(&conv, id, "b1", "approve")).await;
        assert_eq!(a.status, 200, "after room was made: {}", a.body);
        accepted.insert(id.clone());
    }
    delivered_exactly_once(&app, &rx, &bot, &accepted, &refused).await;
    eprintln!(
        "figures: sqlite full disk: slowest 503 {slowest:?}, ready again {recovered:?} after room was made, {} accepted, {} refused, 0 lost",
        accepted.len(),
        refused.len()
    );
}
