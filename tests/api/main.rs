//! Black-box tests over real HTTP on loopback against a real SQLite file.

#[macro_use]
mod helpers;

mod ask;
mod bench_smoke;
mod core;
mod delivery;
mod embed;
mod faults;
mod inbox;
mod lifecycle;
mod newcomer;
mod pages;
mod postgres;
mod postgres_batch;
mod postgres_connect;
mod postgres_wakeups;
mod public;
mod responses;
mod schemas;
