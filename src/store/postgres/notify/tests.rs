//! The payloads and the peer count of [`super`].

use super::*;

#[test]
fn payloads_round_trip_and_own_ones_are_skipped() {
    let me = Instance::new();
    let i1 = me.id().to_string();
    let mut n = Notes::new(&me);
    n.stream(&StreamEvent {
        seq: 7,
        conversation_id: crate::domain::ids::ConversationId::stored("cnv_1"),
        kind: "message.updated".into(),
        data: "{\"a\":\"x\\ty\"}".into(),
    });
    n.due();
    n.due();
    assert_eq!(n.payloads.len(), 2, "one `due` per transaction");
    assert_eq!(parse(&i1, &n.payloads[0]), None);
    assert_eq!(
        parse("i2", &n.payloads[0]),
        Some(Heard::Stream {
            conversation: "cnv_1",
            seq: 7,
            entry: Some(("message.updated", "{\"a\":\"x\\ty\"}")),
        })
    );
    assert_eq!(parse("i2", &n.payloads[1]), Some(Heard::Due));
    let x = erased(&me, "cnv_9");
    assert_eq!(parse(&i1, &x), None);
    assert_eq!(parse("i2", &x), Some(Heard::Erased("cnv_9")));
    assert_eq!(parse("i2", &tokens(&me)), Some(Heard::Tokens));
}

#[test]
fn an_instance_heard_starting_is_not_undone_by_a_count_begun_before() {
    let me = Instance::new();
    assert!(me.has_peers(), "others are assumed until counted");
    let before = me.peers.load(Ordering::Acquire);
    me.peers.fetch_and(!1, Ordering::AcqRel);
    assert!(!me.has_peers());
    me.joined();
    assert!(me.has_peers());
    // What `count` does on finding none, with the value it read first.
    let undone =
        me.peers
            .compare_exchange(before, before & !1, Ordering::AcqRel, Ordering::Acquire);
    assert!(undone.is_err());
    assert!(me.has_peers());
    assert_eq!(
        parse("other", &format!("{}\tj", "other2")),
        Some(Heard::Joined)
    );
}

#[test]
fn a_payload_too_long_names_the_row_only() {
    let big = "x".repeat(MAX_PAYLOAD);
    let p = line("i1", 'a', "bot_1", "int_1", "interaction.answered", &big);
    assert!(p.len() < MAX_PAYLOAD);
    assert_eq!(
        parse("i2", &p),
        Some(Heard::Api {
            chatbot: "bot_1",
            interaction: "int_1",
            event: None,
        })
    );
}
