//! The log's format: JSON (one object a line) or text.

use std::io::IsTerminal;

use crate::config::LogFormat;

/// `--log-format` when given, else JSON when stderr is not a terminal (a
/// log shipper, a service manager) and text on one.
pub fn resolve(flag: Option<LogFormat>) -> LogFormat {
    flag.unwrap_or_else(|| {
        if std::io::stderr().is_terminal() && std::io::stdout().is_terminal() {
            LogFormat::Text
        } else {
            LogFormat::Json
        }
    })
}
