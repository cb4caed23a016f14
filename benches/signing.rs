//! The CPU cost of signing one delivery (Standard Webhooks, HMAC-SHA256),
//! with one live secret and with two during a rotation, and of issuing the
//! `response_url` token every event carries.

use std::hint::black_box;

use blockhook::delivery::signing;
use blockhook::domain::token::{GrantRef, TokenKey};
use criterion::{Criterion, criterion_group, criterion_main};

const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const PREVIOUS: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

fn sign(c: &mut Criterion) {
    // About the size of an interaction.button_clicked payload.
    let body = vec![b'x'; 800];
    let id = "evt_01JZYA7M3T5V6W7X8Y9Z0ABCDE";
    c.bench_function("signing/one_secret_800B", |b| {
        b.iter(|| signing::header(black_box(&[SECRET]), id, 1_784_257_964, black_box(&body)))
    });
    c.bench_function("signing/two_secrets_800B", |b| {
        b.iter(|| {
            signing::header(
                black_box(&[SECRET, PREVIOUS]),
                id,
                1_784_257_964,
                black_box(&body),
            )
        })
    });
}

fn token(c: &mut Criterion) {
    let key = TokenKey::new(&[7u8; 32]);
    c.bench_function("token/response_url", |b| {
        b.iter(|| {
            let mut url = String::with_capacity(220);
            url.push_str("http://127.0.0.1:8080/api/v1/responses/");
            key.issue_into(
                &mut url,
                black_box(GrantRef {
                    event_id: "evt_019ad2c4b6a87f1e9c3b2a1d0e4f5a6b",
                    message_id: "msg_019ad2c4b6a87f1e9c3b2a1d0e4f5a6c",
                    conversation_id: "conv_019ad2c4b6a87f1e9c3b2a1d0e4f5a6d",
                    expires_at: 1_784_257_964_000,
                    new_message_only: false,
                }),
            );
            url
        })
    });
}

criterion_group!(benches, sign, token);
criterion_main!(benches);
