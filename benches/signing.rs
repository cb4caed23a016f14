//! The CPU cost of signing one delivery (Standard Webhooks, HMAC-SHA256),
//! with one live secret and with two during a rotation.

use std::hint::black_box;

use blockhook::delivery::signing;
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

criterion_group!(benches, sign);
criterion_main!(benches);
