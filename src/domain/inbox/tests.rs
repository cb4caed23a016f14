//! The decision of a click or a submit ([`super::decide`]), on its own: no
//! store, no clock, no HTTP. Each rule the contract states is checked here
//! once; the store suites check that every path comes here.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::domain::ids::{ConversationId, MessageId};

use super::{Interaction, decide, from_message};
use crate::domain::blocks::Block;
use crate::domain::error::Rejection;
use crate::domain::interact::{Action, Context};
use crate::domain::model::{Author, Message, Person};
use crate::domain::status::InteractionStatus;
use crate::domain::time::rfc3339;

pub(crate) const T0: i64 = 1_764_800_000_000;
pub(crate) const HOUR: i64 = 3_600_000;

pub(crate) fn visitor() -> Person {
    Person {
        kind: "visitor".into(),
        id: "v_1".into(),
        display_name: "Ada".into(),
    }
}

fn block(v: Value) -> Block {
    serde_json::from_value(v).unwrap()
}

/// A message with a group of buttons (`b1`: `yes`, `no`, a link) and a form
/// (`f1`: a required email and an optional number of at most 10).
pub(crate) fn message(disable: bool) -> Message {
    Message {
        id: MessageId::stored("msg_1"),
        conversation_id: ConversationId::stored("conv_1"),
        author: Author::bot(),
        text: Some("Pick one".into()),
        blocks: vec![
            block(
                json!({"type": "actions", "block_id": "b1", "disable_on_click": disable, "elements": [
                    {"type": "button", "action_id": "yes", "label": "Yes", "value": "y"},
                    {"type": "button", "action_id": "no", "label": "No", "value": "n"},
                    {"type": "button", "action_id": "docs", "label": "Docs", "url": "https://example.com"}
                ]}),
            ),
            block(
                json!({"type": "form", "block_id": "b2", "form_id": "f1", "disable_on_submit": disable, "fields": [
                    {"name": "email", "type": "email", "label": "Email", "required": true},
                    {"name": "n", "type": "number", "label": "N", "max": 10}
                ]}),
            ),
        ],
        attachments: vec![],
        metadata: json!({"order": 7}),
        typing_on_interaction: false,
        created_at: rfc3339(T0),
        updated_at: rfc3339(T0),
        created_ms: T0,
    }
}

pub(crate) fn interactions(msg: &Message) -> Vec<Interaction> {
    from_message(msg, &crate::domain::ids::ChatbotId::stored("bot_1"), None)
        .into_iter()
        .map(|n| Interaction {
            id: n.id,
            chatbot_id: n.chatbot_id,
            conversation_id: n.conversation_id,
            message_id: n.message_id,
            kind: n.kind.to_string(),
            status: InteractionStatus::Pending,
            prompt: n.prompt,
            payload: n.payload,
            spec: n.spec,
            response: None,
            expires_at: n.expires_at,
            created_at: n.created_at,
            updated_at: n.created_at,
            answered_at: None,
        })
        .collect()
}

/// The surroundings of a click at `now`: a day's interactive window, a
/// week's retention, not taken over.
struct Env {
    now: i64,
    taken_over: bool,
    conversation_created: i64,
    user: Person,
    event_id: String,
}

impl Env {
    fn at(now: i64) -> Self {
        Self {
            now,
            taken_over: false,
            conversation_created: T0,
            user: visitor(),
            event_id: "evt_1".into(),
        }
    }

    /// The surroundings of the `k`-th action of a sequence: a second after
    /// `T0`, a millisecond apart, each with its own event id.
    fn nth(k: usize) -> Self {
        Self {
            event_id: format!("evt_{k}"),
            ..Self::at(T0 + 1_000 + k as i64)
        }
    }

    fn ctx(&self) -> Context<'_> {
        Context {
            now_ms: self.now,
            interactive_window_ms: 24 * HOUR,
            retention_ms: 7 * 24 * HOUR,
            conversation_created_ms: self.conversation_created,
            taken_over: self.taken_over,
            chatbot_id: "bot_1",
            user: &self.user,
            event_id: &self.event_id,
            response_url: "https://hooks.test/r/tok",
            allow_comment: false,
            require_one_checked: false,
            answer: None,
        }
    }
}

pub(crate) fn click(action: &str) -> Action {
    Action::Click {
        block_id: "b1".into(),
        action_id: action.into(),
        comment: None,
    }
}

fn submit(values: Value) -> Action {
    Action::Submit {
        form_id: "f1".into(),
        values: values.as_object().cloned().unwrap_or_default(),
    }
}

fn payload(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap()
}

#[test]
fn a_click_is_accepted_with_a_flat_event_and_turns_its_group_off() {
    let mut msg = message(true);
    let mut list = interactions(&msg);
    let env = Env::at(T0 + 1_000);
    let d = decide(&mut list, &mut msg, &click("yes"), env.ctx()).unwrap();
    assert_eq!(d.accepted.event_type, "interaction.button_clicked");
    assert!(d.changed);
    let p = payload(&d.accepted.payload);
    assert_eq!(p["event_id"], "evt_1");
    assert_eq!(p["action_id"], "yes");
    assert_eq!(p["value"], "y");
    assert_eq!(p["response_url"], "https://hooks.test/r/tok");
    assert_eq!(p["message_metadata"], json!({"order": 7}));
    let state = msg.blocks[0].state();
    assert!(state.disabled);
    assert_eq!(state.reason.as_deref(), Some("used"));
    assert_eq!(state.chosen_action_id.as_deref(), Some("yes"));
    assert_eq!(msg.updated_at, rfc3339(T0 + 1_000));
    let answered = d.answered.unwrap();
    assert_eq!(answered.status, InteractionStatus::Answered);
    assert_eq!(answered.response.unwrap()["option_ids"], json!(["yes"]));
}

#[test]
fn the_first_click_wins_and_a_second_is_refused_as_used() {
    let mut msg = message(true);
    let mut list = interactions(&msg);
    let env = Env::at(T0 + 1_000);
    decide(&mut list, &mut msg, &click("yes"), env.ctx()).unwrap();
    let e = decide(&mut list, &mut msg, &click("no"), env.ctx()).unwrap_err();
    assert_eq!(e, Rejection::BlockDisabled);
    assert_eq!(
        msg.blocks[0].state().chosen_action_id.as_deref(),
        Some("yes")
    );
}

#[test]
fn a_group_that_stays_on_takes_every_click_and_answers_its_question_once() {
    let mut msg = message(false);
    let mut list = interactions(&msg);
    let env = Env::at(T0 + 1_000);
    let first = decide(&mut list, &mut msg, &click("yes"), env.ctx()).unwrap();
    let before = msg.clone();
    let second = decide(&mut list, &mut msg, &click("no"), env.ctx()).unwrap();
    assert!(first.answered.is_some());
    assert!(second.answered.is_none(), "answered once");
    assert!(!second.changed);
    assert_eq!(msg, before, "the message is left as it was");
    assert_eq!(payload(&second.accepted.payload)["action_id"], "no");
}

#[test]
fn closed_reasons_come_in_order_takeover_storage_window_expired() {
    let cases = [
        (true, T0, T0 + HOUR, "takeover"),
        (true, T0 - 30 * 24 * HOUR, T0 + 25 * HOUR, "takeover"),
        (false, T0 - 30 * 24 * HOUR, T0 + 25 * HOUR, "storage_window"),
        (false, T0, T0 + 25 * HOUR, "expired"),
    ];
    for (taken_over, created, now, reason) in cases {
        let mut msg = message(true);
        let mut list = interactions(&msg);
        let mut env = Env::at(now);
        env.taken_over = taken_over;
        env.conversation_created = created;
        let before = (msg.clone(), list.clone());
        let e = decide(&mut list, &mut msg, &click("yes"), env.ctx()).unwrap_err();
        assert_eq!(e, Rejection::Closed(reason.into()), "{reason}");
        assert_eq!(msg, before.0);
        assert_eq!(list[0].status, InteractionStatus::Pending);
    }
}

#[test]
fn a_takeover_cancels_what_is_pending_and_turns_every_interactive_block_off() {
    // Two messages: the first with an open group and form, the second
    // already answered (no pending interaction, its blocks on).
    let mut first = message(true);
    let mut second = message(false);
    second.id = MessageId::stored("msg_2");
    let mut pending = interactions(&first);
    let mut answered = interactions(&second);
    answered[0].status = InteractionStatus::Answered;
    pending.push(answered[0].clone());
    // A pending interaction whose message was deleted.
    let mut orphan = interactions(&first)[0].clone();
    orphan.id = crate::domain::ids::InteractionId::stored("int_orphan");
    orphan.message_id = MessageId::stored("msg_gone");
    pending.push(orphan);
    let now = T0 + HOUR;
    let mut messages = vec![first.clone(), second.clone()];
    let changed = super::take_over(&mut messages, &mut pending, now);
    assert_eq!(changed, vec![true, true]);
    for m in &messages {
        for b in m.blocks.iter().filter(|b| b.is_interactive()) {
            assert!(b.state().disabled, "{} {}", m.id, b.block_id());
            assert_eq!(b.state().reason.as_deref(), Some("takeover"));
        }
        assert_eq!(m.updated_at, rfc3339(now));
    }
    let statuses: Vec<_> = pending.iter().map(|i| i.status).collect();
    assert_eq!(
        statuses,
        vec![
            InteractionStatus::Cancelled,
            InteractionStatus::Cancelled,
            InteractionStatus::Answered,
            InteractionStatus::Cancelled,
        ],
        "pending ones cancelled (the orphan too), the answered one kept"
    );
    assert!(
        pending
            .iter()
            .filter(|i| i.status == InteractionStatus::Cancelled)
            .all(|i| i.updated_at == now)
    );
    assert_eq!(pending[2].updated_at, answered[0].updated_at);
    // Nothing left to turn off: a second takeover changes no message.
    let mut again = messages.clone();
    assert_eq!(
        super::take_over(&mut again, &mut [], now + 1),
        vec![false, false]
    );
    assert_eq!(again, messages);
    first.turn_off("used", |_| true);
    assert_eq!(super::take_over(&mut [first], &mut [], now), vec![false]);
}

#[test]
fn a_reviewers_answer_is_admitted_once_and_its_key_gives_the_first_result() {
    use super::{Admit, admit};
    let msg = message(true);
    let mut i = interactions(&msg).remove(0);
    let now = T0 + 1_000;
    assert_eq!(admit(&i, None, "h1", now), Ok(Admit::Go));
    let kept = || Some(("h1".to_string(), "{\"id\":\"int_1\"}".to_string()));
    assert_eq!(
        admit(&i, kept(), "h1", now),
        Ok(Admit::Repeat("{\"id\":\"int_1\"}".into()))
    );
    assert_eq!(
        admit(&i, kept(), "h2", now),
        Err(Rejection::IdempotencyConflict)
    );
    // Answered since: a retry still gets its first result, a new key not.
    i.status = InteractionStatus::Answered;
    assert!(matches!(admit(&i, kept(), "h1", now), Ok(Admit::Repeat(_))));
    assert_eq!(admit(&i, None, "h1", now), Err(Rejection::NotPending));
    // Past its deadline while still stored as pending: not pending.
    i.status = InteractionStatus::Pending;
    i.expires_at = Some(now - 1);
    assert_eq!(admit(&i, None, "h1", now), Err(Rejection::NotPending));
}

#[test]
fn closing_turns_the_blocks_off_once_and_leaves_an_answered_interaction() {
    let mut msg = message(true);
    let mut list = interactions(&msg);
    let now = T0 + HOUR;
    assert!(super::close(
        &mut list[0],
        &mut msg,
        InteractionStatus::Expired,
        "expired",
        now
    ));
    assert_eq!(list[0].status, InteractionStatus::Expired);
    let b1 = msg.blocks.iter().find(|b| b.block_id() == "b1").unwrap();
    assert_eq!(b1.state().reason.as_deref(), Some("expired"));
    let f1 = msg.blocks.iter().find(|b| b.block_id() == "b2").unwrap();
    assert!(!f1.state().disabled, "only the closed interaction's block");
    let before = (msg.clone(), list[0].to_json(now));
    assert!(!super::close(
        &mut list[0],
        &mut msg,
        InteractionStatus::Cancelled,
        "x",
        now + 1
    ));
    assert_eq!(
        (msg, list[0].to_json(now)),
        before,
        "closing twice changes nothing"
    );
}

#[test]
fn a_block_turned_off_for_a_reason_refuses_with_that_reason() {
    let mut msg = message(true);
    msg.turn_off("withdrawn", |_| true);
    let mut list = interactions(&msg);
    let env = Env::at(T0 + 1_000);
    let e = decide(&mut list, &mut msg, &click("yes"), env.ctx()).unwrap_err();
    assert_eq!(e, Rejection::Closed("withdrawn".into()));
}

#[test]
fn links_unknown_actions_and_stray_comments_are_refused() {
    let env = Env::at(T0 + 1_000);
    let mut msg = message(true);
    let mut list = interactions(&msg);
    let e = decide(&mut list, &mut msg, &click("docs"), env.ctx()).unwrap_err();
    assert_eq!(e, Rejection::LinkButton);
    let e = decide(&mut list, &mut msg, &click("maybe"), env.ctx()).unwrap_err();
    assert_eq!(e, Rejection::NotFound);
    let other_block = Action::Click {
        block_id: "b9".into(),
        action_id: "yes".into(),
        comment: None,
    };
    let e = decide(&mut list, &mut msg, &other_block, env.ctx()).unwrap_err();
    assert_eq!(e, Rejection::NotFound);
    let commented = Action::Click {
        block_id: "b1".into(),
        action_id: "yes".into(),
        comment: Some("why".into()),
    };
    match decide(&mut list, &mut msg, &commented, env.ctx()).unwrap_err() {
        Rejection::Invalid(errs) => assert_eq!(errs[0].field, "/comment"),
        other => panic!("{other:?}"),
    }
    assert!(!msg.blocks[0].state().disabled, "nothing refused used it");
}

#[test]
fn a_submit_types_its_values_and_records_them_on_the_block() {
    let mut msg = message(true);
    let mut list = interactions(&msg);
    let env = Env::at(T0 + 1_000);
    let d = decide(
        &mut list,
        &mut msg,
        &submit(json!({"email": "a@example.com", "n": 3})),
        env.ctx(),
    )
    .unwrap();
    assert_eq!(d.accepted.event_type, "interaction.form_submitted");
    let p = payload(&d.accepted.payload);
    assert_eq!(p["values"]["email"], "a@example.com");
    assert_eq!(p["values"]["n"], json!(3));
    let state = msg.blocks[1].state();
    assert_eq!(state.values.as_ref().unwrap()["email"], "a@example.com");
    assert_eq!(d.answered.unwrap().response.unwrap()["type"], "text");
}

#[test]
fn a_bad_submit_names_each_field_and_changes_nothing() {
    let mut msg = message(true);
    let mut list = interactions(&msg);
    let env = Env::at(T0 + 1_000);
    let before = msg.clone();
    let e = decide(
        &mut list,
        &mut msg,
        &submit(json!({"n": 11, "extra": 1})),
        env.ctx(),
    )
    .unwrap_err();
    let Rejection::Invalid(errs) = e else {
        panic!("{e:?}")
    };
    let mut fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
    fields.sort_unstable();
    assert_eq!(fields, ["/values/email", "/values/extra", "/values/n"]);
    assert_eq!(msg, before);
    assert!(list.iter().all(|i| i.status == InteractionStatus::Pending));
}

#[test]
fn the_same_click_in_the_same_surroundings_is_decided_the_same_bytes() {
    let env = Env::at(T0 + 1_000);
    let run = || {
        let mut msg = message(true);
        let mut list = interactions(&msg);
        let d = decide(&mut list, &mut msg, &click("no"), env.ctx()).unwrap();
        (d.accepted.payload, msg)
    };
    assert_eq!(run(), run());
}

/// Any sequence of clicks and submits on one message.
fn actions() -> impl Strategy<Value = Vec<Action>> {
    let one = prop_oneof![
        prop::sample::select(vec!["yes", "no", "docs", "maybe"]).prop_map(click),
        (
            prop::option::of("[a-z]{1,4}@example\\.com"),
            prop::option::of(-5i64..20)
        )
            .prop_map(|(email, n)| {
                let mut v = serde_json::Map::new();
                if let Some(e) = email {
                    v.insert("email".into(), json!(e));
                }
                if let Some(n) = n {
                    v.insert("n".into(), json!(n));
                }
                submit(Value::Object(v))
            }),
    ];
    prop::collection::vec(one, 1..12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Whatever comes in whatever order: a refused action leaves the message
    /// and its interactions exactly as they were; each block that turns off
    /// on use accepts exactly one action, the first acceptable one; each
    /// interaction is answered at most once, by the action that was accepted
    /// first on its block.
    #[test]
    fn first_acceptable_action_wins_and_refusals_leave_no_trace(
        seq in actions(),
        disable in any::<bool>(),
    ) {
        let mut msg = message(disable);
        let mut list = interactions(&msg);
        let mut accepted_on = [0usize; 2];
        let mut answered = 0usize;
        for (k, action) in seq.iter().enumerate() {
            let env = Env::nth(k);
            let before = (msg.clone(), list.clone());
            let at = usize::from(matches!(action, Action::Submit { .. }));
            match decide(&mut list, &mut msg, action, env.ctx()) {
                Ok(d) => {
                    accepted_on[at] += 1;
                    prop_assert!(!disable || accepted_on[at] == 1, "a used block took a second action");
                    prop_assert_eq!(d.changed, disable);
                    let p = payload(&d.accepted.payload);
                    prop_assert_eq!(&p["event_id"], &json!(env.event_id));
                    if d.answered.is_some() {
                        answered += 1;
                        prop_assert_eq!(accepted_on[at], 1, "answered by a later action");
                    }
                }
                Err(e) => {
                    prop_assert_eq!(&msg, &before.0, "{:?} changed the message", e);
                    prop_assert!(list.iter().zip(&before.1).all(|(a, b)| a.status == b.status && a.response == b.response));
                    let names_a_button = matches!(action, Action::Click { action_id, .. } if action_id == "yes" || action_id == "no");
                    if disable && accepted_on[at] == 1 && (at == 1 || names_a_button) {
                        prop_assert_eq!(e, Rejection::BlockDisabled);
                    }
                }
            }
        }
        let settled = list.iter().filter(|i| i.status == InteractionStatus::Answered).count();
        prop_assert_eq!(settled, answered);
        prop_assert!(answered <= 2);
    }

    /// Whatever was clicked and submitted before, a takeover leaves no
    /// interactive block on and nothing pending, keeps what was answered
    /// as it was answered, and a second takeover changes nothing.
    #[test]
    fn a_takeover_after_any_actions_leaves_nothing_open(
        seq in actions(),
        disable in any::<bool>(),
    ) {
        let mut msg = message(disable);
        let mut list = interactions(&msg);
        for (k, action) in seq.iter().enumerate() {
            let env = Env::nth(k);
            let _ = decide(&mut list, &mut msg, action, env.ctx());
        }
        let answered = |l: &[Interaction]| -> Vec<(String, Option<Value>)> {
            l.iter()
                .filter(|i| i.status == InteractionStatus::Answered)
                .map(|i| (i.id.to_string(), i.response.clone()))
                .collect()
        };
        let before = answered(&list);
        let mut messages = vec![msg];
        super::take_over(&mut messages, &mut list, T0 + HOUR);
        prop_assert!(messages[0].blocks.iter().filter(|b| b.is_interactive()).all(|b| b.state().disabled));
        prop_assert!(list.iter().all(|i| i.status != InteractionStatus::Pending));
        prop_assert_eq!(answered(&list), before);
        let after = messages.clone();
        prop_assert_eq!(super::take_over(&mut messages, &mut list, T0 + HOUR + 1), vec![false]);
        prop_assert_eq!(messages, after);
    }
}
