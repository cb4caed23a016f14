//! The live widget stream: replay after `Last-Event-ID`, the visitor's own
//! stream only, typing, several instances, and what changes the message.

use super::*;

store_test! {
async fn reconnecting_with_last_event_id_replays_from_the_store() {
    let mut s = setup().await;
    let mut first = Sse::connect(&s.app, &s.conv, None).await;
    let marker = s
        .app
        .bot_message(&s.bot, &s.conv, json!({"text": "marker"}))
        .await;
    let seen = first
        .until(WAIT, |e| {
            e.event == "message.created" && e.data["id"] == marker["id"]
        })
        .await;
    let last = seen.last().expect("event").id.expect("id");
    drop(first);

    // Missed while disconnected.
    let url = s.click_for_url().await;
    reply(&s.app, &url, json!({"text": "Approved"})).await;
    reply(
        &s.app,
        &url,
        json!({"text": "More", "replace_original": false}),
    )
    .await;
    reply(&s.app, &url, json!({"delete_original": true})).await;
    let expected = vec![
        "message.updated",
        "message.updated",
        "message.created",
        "message.deleted",
    ];

    let mut resumed = Sse::connect(&s.app, &s.conv, Some(last)).await;
    let replayed = resumed.until(WAIT, |e| e.event == "message.deleted").await;
    assert_eq!(kinds(&replayed), expected);
    assert_eq!(replayed[1].data["text"], "Approved");
    let ids: Vec<i64> = replayed.iter().map(|e| e.id.expect("id")).collect();
    assert!(
        ids[0] > last && ids.windows(2).all(|w| w[0] < w[1]),
        "{ids:?}"
    );

    // A second server on the same database file never saw these in memory.
    let db = s.app.database.clone();
    let other = spawn_app_with(move |c| c.database = db).await;
    let mut from_store = Sse::connect_at(&other.address, &s.app, &s.conv, Some(last)).await;
    let again = from_store
        .until(WAIT, |e| e.event == "message.deleted")
        .await;
    let again_ids: Vec<i64> = again.iter().map(|e| e.id.expect("id")).collect();
    assert_eq!(again_ids, ids);

    // Without Last-Event-ID nothing is replayed.
    let mut fresh = Sse::connect(&s.app, &s.conv, None).await;
    let next = s
        .app
        .bot_message(&s.bot, &s.conv, json!({"text": "live"}))
        .await;
    let e = fresh.next(WAIT).await.expect("live event");
    assert_eq!(e.event, "message.created");
    assert_eq!(e.data["id"], next["id"]);
}
}

store_test! {
async fn the_stream_is_the_visitors_own() {
    let s = setup().await;
    let other = s.app.create_conv(&s.bot).await;
    let path = format!("/widget/v1/conversations/{}/stream", s.conv.id);
    let r = s.app.get(&path, &other.token).await;
    assert_eq!(r.status(), 404);
    let r = s
        .app
        .client
        .get(s.app.url(&path))
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 401);
}
}

async fn typing_message(s: &mut Setup, typing: bool) {
    let msg = s
        .app
        .bot_message(
            &s.bot,
            &s.conv,
            json!({"text": "Pick one", "typing_on_interaction": typing, "blocks": [
                {"type": "actions", "block_id": "b1", "elements": [
                    {"type": "button", "action_id": "approve", "label": "Approve", "value": "v"}]}]}),
        )
        .await;
    s.message_id = msg["id"].as_str().expect("id").into();
}

store_test! {
async fn typing_shows_after_a_click_until_the_reply_arrives() {
    let mut s = setup().await;
    typing_message(&mut s, true).await;
    let mut stream = Sse::connect(&s.app, &s.conv, None).await;
    let url = s.click_for_url().await;

    let before = stream.until(WAIT, |e| e.event == "typing").await;
    assert_eq!(kinds(&before), vec!["message.updated", "typing"]);
    let on = &before[1].data;
    assert_eq!(on["active"], true);
    assert_eq!(on["message_id"], json!(s.message_id));
    assert_eq!(on["conversation_id"], json!(s.conv.id));

    let (status, _) = reply(&s.app, &url, json!({"text": "Done"})).await;
    assert_eq!(status, 200);
    let after = stream.until(WAIT, |e| e.event == "typing").await;
    assert_eq!(kinds(&after), vec!["message.updated", "typing"]);
    assert_eq!(after[0].data["text"], "Done");
    assert_eq!(after[1].data["active"], false);
}
}

store_test! {
async fn typing_is_off_by_default() {
    let mut s = setup().await;
    typing_message(&mut s, false).await;
    let mut stream = Sse::connect(&s.app, &s.conv, None).await;
    let url = s.click_for_url().await;
    let (status, _) = reply(&s.app, &url, json!({"text": "Done"})).await;
    assert_eq!(status, 200);
    let marker = s
        .app
        .bot_message(&s.bot, &s.conv, json!({"text": "marker"}))
        .await;
    let seen = stream
        .until(WAIT, |e| {
            e.event == "message.created" && e.data["id"] == marker["id"]
        })
        .await;
    assert_eq!(
        kinds(&seen),
        vec!["message.updated", "message.updated", "message.created"],
        "no typing entries"
    );
}
}

store_test! {
async fn a_replacement_can_turn_typing_on_for_its_new_buttons() {
    let mut s = setup().await;
    typing_message(&mut s, false).await;
    let url = s.click_for_url().await;
    let (status, body) = reply(
        &s.app,
        &url,
        json!({"text": "Anything else?", "typing_on_interaction": true, "blocks": new_blocks()}),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["message"]["typing_on_interaction"], true);

    let mut stream = Sse::connect(&s.app, &s.conv, None).await;
    let r = s.app.click(&s.conv, &s.message_id, "b2", "undo").await;
    assert_eq!(r.status(), 200);
    let seen = stream.until(WAIT, |e| e.event == "typing").await;
    assert_eq!(kinds(&seen), vec!["message.updated", "typing"]);
    assert_eq!(seen[1].data["active"], true);
}
}

#[actix_web::test]
async fn on_postgres_a_stream_sees_what_another_instance_wrote() {
    let db = fresh_postgres_database().await;
    let db2 = db.clone();
    let a = spawn_app_with(|c| c.database = Database::Postgres(db)).await;
    let b = spawn_app_with(|c| c.database = Database::Postgres(db2)).await;
    let mut s = setup_on(a, Receiver::start().await).await;
    // Connected to instance B; the click and the reply go to instance A.
    let mut stream = Sse::connect_at(&b.address, &s.app, &s.conv, None).await;
    let url = s.click_for_url().await;
    let (status, _) = reply(&s.app, &url, json!({"text": "From A"})).await;
    assert_eq!(status, 200);
    let seen = stream
        .until(WAIT, |e| {
            e.event == "message.updated" && e.data["text"] == "From A"
        })
        .await;
    assert_eq!(kinds(&seen), vec!["message.updated", "message.updated"]);
    let first = seen[0].id.expect("id");

    // And B replays from the shared store.
    let mut resumed = Sse::connect_at(&b.address, &s.app, &s.conv, Some(first)).await;
    let replayed = resumed.next(WAIT).await.expect("replayed");
    assert_eq!(replayed.data["text"], "From A");
    assert_eq!(replayed.id, seen[1].id);
}

store_test! {
async fn only_a_click_that_turns_a_block_off_changes_the_message() {
    let app = spawn_app().await;
    let rx = Receiver::start().await;
    let bot = app.create_bot(&rx.url).await;
    let conv = app.create_conv(&bot).await;
    let stays = app.buttons(&bot, &conv, false).await;
    let turns_off = app.buttons(&bot, &conv, true).await;
    let (stays_id, off_id) = (
        stays["id"].as_str().unwrap(),
        turns_off["id"].as_str().unwrap(),
    );
    let mut stream = Sse::connect(&app, &conv, None).await;

    for action in ["approve", "deny"] {
        let r = app.click(&conv, stays_id, "b1", action).await;
        let v: Value = r.json().await.expect("json");
        assert_eq!(v["message"]["updated_at"], stays["updated_at"], "{v}");
        assert_eq!(
            v["message"]["blocks"][0]["state"],
            stays["blocks"][0]["state"]
        );
    }
    let r = app.click(&conv, off_id, "b1", "approve").await;
    let v: Value = r.json().await.expect("json");
    assert_eq!(v["message"]["blocks"][0]["state"]["reason"], "used", "{v}");
    assert_ne!(v["message"]["updated_at"], turns_off["updated_at"]);

    let seen = stream
        .until(Duration::from_secs(3), |e| {
            e.event == "message.updated" && e.data["id"] == json!(off_id)
        })
        .await;
    assert!(
        seen.iter()
            .any(|e| e.event == "message.updated" && e.data["id"] == json!(off_id)),
        "the block that turned off is shown"
    );
    assert!(
        !seen
            .iter()
            .any(|e| e.event == "message.updated" && e.data["id"] == json!(stays_id)),
        "a button that stays on changes nothing the widget shows: {:?}",
        seen.iter().map(|e| &e.event).collect::<Vec<_>>()
    );
    // Both clicks of the button that stays on were still delivered.
    let events = app.events(&bot).await;
    assert_eq!(events.len(), 3, "{events:?}");
}
}
