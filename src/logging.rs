//! Where memfs' log lines go: stderr, filtered by -v/-q or RUST_LOG, as
//! text or JSON (`--log-format`). The lines that answer a person (mounted,
//! written out, errors) are printed as they always were; the log says what
//! memfs does and what fails, for someone watching or a service manager.

use tracing_subscriber::EnvFilter;

use crate::cli::{Common, LogFormat};

pub fn init(common: &Common) {
    let level = match (common.quiet, common.verbose) {
        (true, _) => "error",
        (false, 0) => "warn",
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.is_empty() => EnvFilter::new(spec),
        _ => EnvFilter::new(format!("memfs={level}")),
    };
    // -vvv: every request (each span as it opens).
    let spans = match common.verbose {
        3.. => tracing_subscriber::fmt::format::FmtSpan::NEW,
        _ => tracing_subscriber::fmt::format::FmtSpan::NONE,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_span_events(spans)
        .with_writer(std::io::stderr)
        // A log line stderr cannot take (full, closed) is lost, quietly:
        // the subscriber's own report of it is an eprintln!, which panics
        // when stderr cannot be written.
        .log_internal_errors(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false);
    let _ = match common.log_format {
        LogFormat::Json => builder.json().with_current_span(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
