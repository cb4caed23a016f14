//! What an operator sees of the service: Prometheus metrics, W3C trace
//! context carried from a request into the webhooks it causes, and the
//! log's format.

pub mod logs;
pub mod metrics;
pub mod otlp;
pub mod trace;
