//! How `chargeonce serve` writes its logs (to standard error; what is
//! logged is chosen by `RUST_LOG`, default `info`).

use clap::{Args, ValueEnum};

/// The shape of a log line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines: time, level, the spans with their fields
    /// (`request{request_id=... method=POST path=/v1/payments}`), message.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields`
    /// (the message and the event's fields), `span` (the innermost span's
    /// fields) and `spans` (every span from the outermost, so the request's
    /// `request_id` is on every line of a request).
    Json,
}

/// The log flags.
#[derive(Debug, Clone, Args)]
pub struct LogArgs {
    /// `text` (for people) or `json` (one JSON object per line, with the
    /// request's `request_id`, method and path on each line of a request).
    #[arg(long, env = "CHARGEONCE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}
