//! blockhook: chat-widget interactions turned into signed, durable webhook
//! events.

pub mod ask_cli;
pub mod bench;
pub mod cli;
pub mod config;
pub mod delivery;
pub mod domain;
pub mod http;
pub mod hub;
pub mod lifecycle;
pub mod limits;
pub mod mcp;
pub mod schemas;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod usecase;
