//! The CPU cost of accepting a click or a submit, piece by piece: the
//! payload bytes, the typed form values, the pure decision, and the JSON
//! round trip of the stored message document.

use std::hint::black_box;

use blockhook::domain::blocks::Block;
use blockhook::domain::events::{self, Base};
use blockhook::domain::interact::{self, Action, Context};
use blockhook::domain::values;
use criterion::{Criterion, criterion_group, criterion_main};

mod common;
use common as fixtures;

fn payload(c: &mut Criterion) {
    let msg = fixtures::message();
    let user = fixtures::visitor();
    let base = Base {
        event_id: "evt_01JZYA7M3T5V6W7X8Y9Z0ABCDE",
        chatbot_id: "cb_01JZYA7M3T5V6W7X8Y9Z0ABCDE",
        conversation_id: &msg.conversation_id,
        message_id: &msg.id,
        user: &user,
        response_url: fixtures::RESPONSE_URL,
    };
    c.bench_function("payload/button_clicked", |b| {
        b.iter(|| {
            events::button_clicked(
                black_box(&base),
                "b1",
                "approve",
                "req_991",
                "Approve",
                &msg.metadata,
                "2026-07-17T03:12:44.120Z",
            )
        })
    });
}

fn form_values(c: &mut Criterion) {
    let msg = fixtures::message();
    let Some(Block::Form { fields, .. }) = msg.blocks.get(1) else {
        panic!("the fixture has a form second");
    };
    let input = fixtures::form_input();
    c.bench_function("values/check_six_fields", |b| {
        b.iter(|| values::check(black_box(fields), black_box(&input), "/values"))
    });
}

fn decision(c: &mut Criterion) {
    let msg = fixtures::message();
    let user = fixtures::visitor();
    let ctx = Context {
        now_ms: msg.created_ms + 1_000,
        interactive_window_ms: 30 * 86_400_000,
        retention_ms: 90 * 86_400_000,
        conversation_created_ms: msg.created_ms,
        taken_over: false,
        chatbot_id: "cb_01JZYA7M3T5V6W7X8Y9Z0ABCDE",
        user: &user,
        event_id: "evt_01JZYA7M3T5V6W7X8Y9Z0ABCDE",
        response_url: fixtures::RESPONSE_URL,
        allow_comment: false,
        require_one_checked: false,
        answer: None,
    };
    let click = Action::Click {
        block_id: "b1".into(),
        action_id: "approve".into(),
        comment: None,
    };
    let submit = Action::Submit {
        form_id: "callback".into(),
        values: fixtures::form_input(),
    };
    c.bench_function("interact/apply_click", |b| {
        b.iter_batched_ref(
            || msg.clone(),
            |m| interact::apply(m, &ctx, black_box(&click)),
            criterion::BatchSize::SmallInput,
        )
    });
    c.bench_function("interact/apply_submit", |b| {
        b.iter_batched_ref(
            || msg.clone(),
            |m| interact::apply(m, &ctx, black_box(&submit)),
            criterion::BatchSize::SmallInput,
        )
    });
}

fn message_doc(c: &mut Criterion) {
    let msg = fixtures::message();
    let doc = serde_json::to_string(&msg).expect("doc");
    c.bench_function("message_doc/parse", |b| {
        b.iter(|| serde_json::from_str::<blockhook::domain::model::Message>(black_box(&doc)))
    });
    c.bench_function("message_doc/serialize", |b| {
        b.iter(|| serde_json::to_string(black_box(&msg)))
    });
}

criterion_group!(benches, payload, form_values, decision, message_doc);
criterion_main!(benches);
