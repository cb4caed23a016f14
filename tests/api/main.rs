//! Black-box tests over real HTTP on loopback against a real SQLite file.

#[macro_use]
mod helpers;

mod answers;
mod ask;
mod ask_cli;
mod bench_smoke;
mod blocks;
mod conversations;
mod core;
mod delivery;
mod deploy;
mod embed;
mod endpoints;
mod faults;
mod inbox;
mod lifecycle;
mod newcomer;
mod operating;
mod pages;
mod portal;
mod postgres;
mod postgres_batch;
mod postgres_connect;
mod postgres_heads;
mod postgres_wakeups;
mod public;
mod responses;
mod review;
mod schemas;
mod store_faults;
