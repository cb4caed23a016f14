//! Black-box tests over real HTTP on loopback against a real SQLite file.

#[macro_use]
mod helpers;

mod bench_smoke;
mod core;
mod delivery;
mod inbox;
mod pages;
mod postgres;
mod postgres_connect;
mod postgres_wakeups;
mod responses;
mod schemas;
