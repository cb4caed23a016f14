//! `blockhook serve` exit codes, from the real binary: 78 a bad flag or
//! value, 69 a store that cannot be reached (the cause named), 73 a SQLite
//! file or folder that cannot be created, 0 after a clean shutdown.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::helpers::fresh_postgres_database;

/// Runs `blockhook serve` with `args` and returns its exit code and stderr.
/// Every case here fails at start: a hang is a failure.
fn serve(args: &[&str]) -> (i32, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .args(["serve", "--addr", "127.0.0.1:0", "--log-format", "text"])
        .args(args)
        .env_remove("BLOCKHOOK_DATABASE")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start blockhook");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("blockhook serve {args:?} did not exit");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    use std::io::Read;
    let _ = child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut err);
    (status.code().unwrap_or(-1), err)
}

#[test]
fn a_bad_flag_or_value_exits_78_naming_it() {
    let (code, err) = serve(&["--delivery-timeout", "banana"]);
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("--delivery-timeout"), "{err}");
    let (code, err) = serve(&["--retry-max-attempts", "0"]);
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("--retry-max-attempts"), "{err}");
    let (code, err) = serve(&["--database", "mysql://x"]);
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("--database"), "{err}");
    let (code, err) = serve(&["--no-such-flag"]);
    assert_eq!(code, 78, "{err}");
    assert!(err.contains("--no-such-flag"), "{err}");
}

#[test]
fn a_missing_sqlite_folder_exits_73_and_is_not_created() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("not").join("there");
    let db = format!("sqlite://{}/blockhook.db", missing.display());
    let (code, err) = serve(&["--database", &db]);
    assert_eq!(code, 73, "{err}");
    assert!(err.contains(&missing.display().to_string()), "{err}");
    assert!(err.contains("does not exist"), "{err}");
    assert!(!missing.exists(), "serve created {}", missing.display());
    assert!(!dir.path().join("not").exists());
}

#[test]
fn a_sqlite_file_that_cannot_be_opened_exits_73() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A folder where the file should be.
    let path = dir.path().join("blockhook.db");
    std::fs::create_dir(&path).expect("mkdir");
    let (code, err) = serve(&["--database", &format!("sqlite://{}", path.display())]);
    assert_eq!(code, 73, "{err}");
    assert!(err.contains(&path.display().to_string()), "{err}");
}

#[test]
fn an_unreachable_postgres_exits_69_saying_connection_refused_at_host_port() {
    let port = crate::delivery::refusing_port();
    let url = format!("postgres://blockhook_test:blockhook_test@127.0.0.1:{port}/x");
    let (code, err) = serve(&["--database", &url]);
    assert_eq!(code, 69, "{err}");
    assert!(
        err.contains(&format!("connection refused at 127.0.0.1:{port}")),
        "{err}"
    );
    assert!(!err.contains(":blockhook_test@"), "a password in {err}");
}

#[actix_web::test]
async fn a_bad_postgres_password_exits_69_saying_so() {
    let url = fresh_postgres_database().await;
    let mut u = url::Url::parse(&url).expect("url");
    u.set_password(Some("not-the-password-9f2c"))
        .expect("password");
    let (code, err) = serve(&["--database", u.as_str()]);
    assert_eq!(code, 69, "{err}");
    assert!(err.contains("bad password"), "{err}");
    assert!(err.contains("blockhook_test"), "the user is named: {err}");
    assert!(!err.contains("not-the-password-9f2c"), "{err}");
}
