//! The `agwire` binary.
//!
//! - `agwire serve`: the agent-run service (the API, the web app at `/`) on
//!   embedded SQLite, or on PostgreSQL shared by several replicas.
//! - `agwire run <URL>`: stream a run of any AG-UI endpoint in the terminal.
//! - `agwire check <URL>`: judge any AG-UI endpoint by the official rules.
//! - `agwire attachments copy-to-bucket`: move stored attachments into the
//!   configured S3-compatible bucket.

use std::io::Write;
use std::process::ExitCode;

use agwire_service::telemetry::Telemetry;
use clap::{Parser, Subcommand};

/// mimalloc instead of glibc's malloc for Rust's allocations. Why: a run
/// allocates and frees many small buffers on several threads (HTTP heads,
/// JSON, events); with glibc that was ~10 % of the service's CPU
/// (`_int_malloc`, `malloc_consolidate`): tokio's CPU per accepted run is
/// 20-30 % lower with it (`bench/service.sh`), for ~10 MiB more resident at
/// start and ~0.3 KiB more per executing run (`bench/run_memory.sh`). C code
/// (SQLite, llama.cpp) keeps the C library's `malloc`: replacing that too
/// (mimalloc's `override`) broke the process under an `LD_PRELOAD`ed
/// library (libfaketime, as the browser tests use: the data dir's path came
/// out corrupted).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod check;
mod render;
mod run;
mod serve;

/// AG-UI from the command line.
#[derive(Debug, Parser)]
#[command(name = "agwire", version, about)]
struct Cli {
    /// Log lines as text or as JSON objects (one per line).
    #[arg(long, global = true, env = "AGWIRE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

/// Logs go to stderr: `RUST_LOG` if set, else `info` for the service (one
/// line per request and per run) and warnings only for `agwire run`, whose
/// output is the terminal's; colours only on a terminal. With telemetry on,
/// the spans go to the OTLP collector too.
fn init_logs(format: LogFormat, serving: bool, telemetry: &Telemetry) {
    use std::io::IsTerminal;
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::FilterExt as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    // llama.cpp (the local model) logs its own details at info: errors
    // only. Model and tool call spans are for traces, not log lines.
    let default = if serving {
        "info,llama_cpp_2=error,agwire_llm::telemetry=warn"
    } else {
        "warn"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default))
        // The spans that exist only to be exported never reach the logs.
        .and(tracing_subscriber::filter::filter_fn(|meta| {
            meta.target() != agwire_service::telemetry::OTEL_TARGET
        }));
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let logs = match format {
        LogFormat::Json => logs.json().with_filter(filter).boxed(),
        LogFormat::Text => logs.with_filter(filter).boxed(),
    };
    tracing_subscriber::registry()
        .with(logs)
        .with(telemetry.layer())
        .init();
}

// Parsed once at start: the size of the value does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the agent-run service: the API and the web app on
    /// 127.0.0.1:8080, data in ./agwire-data (SQLite) or PostgreSQL.
    Serve(serve::ServeArgs),
    /// Run an AG-UI agent and stream its events in the terminal.
    Run(run::RunArgs),
    /// Judge an AG-UI endpoint by the official rules: scenarios for every
    /// rule family, a table (or --json, --junit FILE), exit 1 on a violation.
    Check(check::CheckArgs),
    /// Operate on the service's stored attachments.
    #[command(subcommand)]
    Attachments(serve::AttachmentsCommand),
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let command = match cli.command {
        Command::Serve(args) => return serve_command(cli.log_format, &args).await,
        command => command,
    };
    init_logs(cli.log_format, false, &Telemetry::off());
    match command {
        Command::Run(args) => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            match run::run(args, &mut out).await {
                Ok(code) => code,
                Err(error) => {
                    let _ = out.flush();
                    let _ = writeln!(std::io::stderr(), "agwire: {error}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Check(args) => {
            let stdout = std::io::stdout();
            let mut out = stdout.lock();
            match check::check(args, &mut out).await {
                Ok(code) => code,
                Err(error) => {
                    let _ = out.flush();
                    let _ = writeln!(std::io::stderr(), "agwire check: {error}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Attachments(command) => match serve::attachments(command).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                let _ = writeln!(std::io::stderr(), "agwire attachments: {error}");
                ExitCode::FAILURE
            }
        },
        // Served above.
        Command::Serve(_) => ExitCode::FAILURE,
    }
}

/// `agwire serve`: its configuration first (telemetry is part of it, and
/// the logs' subscriber carries its layer), then the service; at the end,
/// what the exporters hold is sent.
async fn serve_command(format: LogFormat, args: &serve::ServeArgs) -> ExitCode {
    let failed = |error: String| {
        let _ = writeln!(std::io::stderr(), "agwire serve: {error}");
        ExitCode::FAILURE
    };
    let config = match args.config() {
        Ok(config) => config,
        Err(error) => return failed(error),
    };
    let telemetry = match Telemetry::start(&config.telemetry) {
        Ok(telemetry) => telemetry,
        Err(error) => return failed(error.to_string()),
    };
    init_logs(format, true, &telemetry);
    let served = serve::serve(&config, telemetry.clone()).await;
    // The exporters block while they flush: off the runtime's threads.
    let _ = tokio::task::spawn_blocking(move || telemetry.shutdown()).await;
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => failed(error),
    }
}
