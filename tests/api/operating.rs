//! §16 for operators: exit codes of `serve`, the log's lines, trace context
//! carried into webhooks, OTLP export.

mod exit_codes;
mod logs;
mod otlp;
mod trace;
