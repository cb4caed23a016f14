//! An ask's attachment: upload, the message's `attachments`, both download
//! routes, the limits, and `blockhook ask --attach`.

use base64::Engine;
use serde_json::{Value, json};

use super::nowait::{ask_later, last_message};
use crate::helpers::*;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Bytes that are not text, so any re-encoding would show.
fn sample() -> Vec<u8> {
    (0..3000u32).map(|i| (i * 7 % 256) as u8).collect()
}

async fn download(app: &TestApp, path: &str, bearer: &str) -> reqwest::Response {
    app.get(path, bearer).await
}

store_test! {
async fn an_ask_carries_a_file_that_its_visitor_and_its_chatbot_can_download() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let bytes = sample();
    let filename = "release \"v2\" ü.diff";
    ask_later(
        &app,
        &bot,
        &conv,
        json!({"message": "Merge this?", "attachment":
            {"filename": filename, "content_type": "text/x-diff", "data": B64.encode(&bytes)}}),
    )
    .await;
    let m = last_message(&app, &conv).await;
    let list = m["attachments"].as_array().expect("attachments");
    assert_eq!(list.len(), 1);
    let a = &list[0];
    let id = a["id"].as_str().unwrap();
    assert!(id.starts_with("att_") && id.len() == 30, "{id}");
    assert_eq!(a["filename"], filename);
    assert_eq!(a["content_type"], "text/x-diff");
    assert_eq!(a["size"], bytes.len());
    let url = a["url"].as_str().unwrap();
    assert!(url.starts_with("http") && url.ends_with(&format!("/widget/v1/attachments/{id}")), "{url}");
    assert_eq!(a.as_object().unwrap().len(), 5);
    let i: Value = app
        .get(&format!("/api/v1/interactions?conversation_id={}", conv.id), &bot.api_key)
        .await
        .json()
        .await
        .unwrap();
    // The inbox card lists it too, at the API's url (read with the API key).
    let mut through_api = a.clone();
    through_api["url"] = json!(url.replace("/widget/v1/", "/api/v1/"));
    assert_eq!(i["data"][0]["payload"]["attachments"], json!([through_api]));

    for (path, bearer) in [
        (format!("/widget/v1/attachments/{id}"), conv.token.as_str()),
        (format!("/api/v1/attachments/{id}"), bot.api_key.as_str()),
    ] {
        let r = download(&app, &path, bearer).await;
        assert_eq!(r.status(), 200, "{path}");
        let h = r.headers().clone();
        assert_eq!(h["content-type"], "text/x-diff");
        assert_eq!(h["x-content-type-options"], "nosniff");
        let cd = h["content-disposition"].to_str().unwrap();
        assert!(cd.starts_with("attachment; "), "{cd}");
        assert!(cd.contains(r#"filename="release _v2_ _.diff""#), "{cd}");
        assert!(cd.contains("filename*=UTF-8''release%20%22v2%22%20%C3%BC.diff"), "{cd}");
        assert_eq!(r.bytes().await.unwrap().as_ref(), bytes.as_slice(), "the same bytes");
    }

    // Anyone else: 404 (another conversation, another chatbot, no such id).
    let other_conv = app.create_conv(&bot).await;
    let other_bot = app.create_bot(&rx.url).await;
    let foreign_conv = app.create_conv(&other_bot).await;
    for (path, bearer) in [
        (format!("/widget/v1/attachments/{id}"), other_conv.token.as_str()),
        (format!("/widget/v1/attachments/{id}"), foreign_conv.token.as_str()),
        (format!("/api/v1/attachments/{id}"), other_bot.api_key.as_str()),
        ("/api/v1/attachments/att_00000000000000000000000000".to_string(), bot.api_key.as_str()),
        ("/widget/v1/attachments/att_00000000000000000000000000".to_string(), conv.token.as_str()),
    ] {
        let r = download(&app, &path, bearer).await;
        assert_eq!(r.status(), 404, "{path}");
        assert_eq!(r.json::<Value>().await.unwrap()["code"], "not_found");
    }
    // A credential of the other kind is no credential here.
    assert_eq!(download(&app, &format!("/widget/v1/attachments/{id}"), &bot.api_key).await.status(), 401);
    assert_eq!(download(&app, &format!("/api/v1/attachments/{id}"), &conv.token).await.status(), 401);
}
}

store_test! {
async fn a_bad_or_oversized_attachment_is_422_on_its_field() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let limit = 512 * 1024;
    let file = |name: &str, ctype: &str, data: String| {
        json!({"message": "Look?", "wait": false,
               "attachment": {"filename": name, "content_type": ctype, "data": data}})
    };
    for (body, field) in [
        (file("big.bin", "application/octet-stream", B64.encode(vec![7u8; limit + 1])), "/attachment/data"),
        (file("a.txt", "text/plain", "not base64!".into()), "/attachment/data"),
        (file("../a.txt", "text/plain", B64.encode(b"x")), "/attachment/filename"),
        (file("a\u{7}.txt", "text/plain", B64.encode(b"x")), "/attachment/filename"),
        (file(&"n".repeat(121), "text/plain", B64.encode(b"x")), "/attachment/filename"),
        (file("a.txt", "plain text", B64.encode(b"x")), "/attachment/content_type"),
        (json!({"message": "Look?", "attachment": {"filename": "a.txt", "content_type": "text/plain"}}), "/attachment/data"),
        (json!({"message": "Look?", "attachment": "a.txt"}), "/attachment"),
    ] {
        let r = app
            .post(&format!("/api/v1/conversations/{}/ask", conv.id), &bot.api_key, &body)
            .await;
        assert_eq!(r.status(), 422, "{field}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["code"], "validation_failed");
        let fields: Vec<&str> = v["errors"].as_array().unwrap().iter().map(|e| e["field"].as_str().unwrap()).collect();
        assert_eq!(fields, [field]);
    }
    // Exactly 512 KiB is taken; nothing refused was asked.
    let id = {
        let r = app
            .post(
                &format!("/api/v1/conversations/{}/ask", conv.id),
                &bot.api_key,
                &file("max.bin", "application/octet-stream", B64.encode(vec![7u8; limit])),
            )
            .await;
        assert_eq!(r.status(), 202);
        let m = last_message(&app, &conv).await;
        m["attachments"][0]["id"].as_str().unwrap().to_string()
    };
    let r = download(&app, &format!("/api/v1/attachments/{id}"), &bot.api_key).await;
    assert_eq!(r.bytes().await.unwrap().len(), limit);
    let v: Value = app.get(&format!("/widget/v1/conversations/{}/messages", conv.id), &conv.token).await.json().await.unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 1, "only the accepted question was posted");
}
}

async fn cli(args: &[&str], app: &TestApp, key: &str) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_blockhook"))
        .arg("ask")
        .args(args)
        .env("BLOCKHOOK_URL", &app.address)
        .env("BLOCKHOOK_API_KEY", key)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

store_test! {
async fn the_cli_attaches_a_file_or_exits_66_before_asking() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let missing = app.dir.path().join("no-such-file.txt");
    let out = cli(&[&conv.id, "Read this?", "--attach", missing.to_str().unwrap()], &app, &bot.api_key)
        .await
        .wait_with_output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(66), "{}", String::from_utf8_lossy(&out.stderr));
    // A directory cannot be read as a file either.
    let out = cli(&[&conv.id, "Read this?", "--attach", app.dir.path().to_str().unwrap()], &app, &bot.api_key)
        .await
        .wait_with_output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(66));
    let v: Value = app.get(&format!("/widget/v1/conversations/{}/messages", conv.id), &conv.token).await.json().await.unwrap();
    assert_eq!(v["data"], json!([]), "nothing was asked");

    let path = app.dir.path().join("notes.txt");
    std::fs::write(&path, "line one\nline two\n").unwrap();
    let child = cli(&[&conv.id, "Read this?", "--attach", path.to_str().unwrap()], &app, &bot.api_key).await;
    let m = loop {
        let m = last_message(&app, &conv).await;
        if !m.is_null() {
            break m;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let a = &m["attachments"][0];
    assert_eq!(a["filename"], "notes.txt");
    assert_eq!(a["content_type"], "text/plain", "guessed from the extension");
    let r = download(&app, &format!("/api/v1/attachments/{}", a["id"].as_str().unwrap()), &bot.api_key).await;
    assert_eq!(r.bytes().await.unwrap().as_ref(), b"line one\nline two\n");
    assert_eq!(app.click(&conv, m["id"].as_str().unwrap(), "ask", "accept").await.status(), 200);
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(0));
}
}

/// Deletes a conversation row as the purge does, with the store's rules
/// (on SQLite, foreign keys on).
async fn delete_conversation(app: &TestApp, id: &str) {
    match &app.database {
        blockhook::config::Database::Sqlite(p) => {
            let c = rusqlite::Connection::open(p).unwrap();
            c.busy_timeout(std::time::Duration::from_secs(10)).unwrap();
            c.pragma_update(None, "foreign_keys", "ON").unwrap();
            c.execute("DELETE FROM conversations WHERE id = ?1", [id])
                .unwrap();
        }
        blockhook::config::Database::Postgres(u) => {
            use sqlx::Connection;
            let mut c = sqlx::PgConnection::connect(u).await.unwrap();
            sqlx::query("DELETE FROM conversations WHERE id = $1")
                .bind(id)
                .execute(&mut c)
                .await
                .unwrap();
        }
    }
}

store_test! {
async fn an_attachment_is_deleted_with_its_conversation() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let keep = app.create_conv(&bot).await;
    let file = json!({"filename": "a.txt", "content_type": "text/plain", "data": B64.encode(b"a")});
    ask_later(&app, &bot, &conv, json!({"message": "A?", "attachment": file})).await;
    ask_later(&app, &bot, &keep, json!({"message": "B?", "attachment": file})).await;
    let gone = last_message(&app, &conv).await["attachments"][0]["id"].as_str().unwrap().to_string();
    let kept = last_message(&app, &keep).await["attachments"][0]["id"].as_str().unwrap().to_string();
    delete_conversation(&app, &conv.id).await;
    assert_eq!(download(&app, &format!("/api/v1/attachments/{gone}"), &bot.api_key).await.status(), 404);
    assert_eq!(download(&app, &format!("/api/v1/attachments/{kept}"), &bot.api_key).await.status(), 200);
}
}
