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
/// output is the terminal's; colours only on a terminal.
fn init_logs(format: LogFormat, serving: bool) {
    use std::io::IsTerminal;
    // llama.cpp (the local model) logs its own details at info: errors only.
    let default = if serving {
        "info,llama_cpp_2=error"
    } else {
        "warn"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Json => logs.json().init(),
        LogFormat::Text => logs.init(),
    }
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
    init_logs(cli.log_format, matches!(cli.command, Command::Serve(_)));
    match cli.command {
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
        Command::Serve(args) => match serve::serve(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                let _ = writeln!(std::io::stderr(), "agwire serve: {error}");
                ExitCode::FAILURE
            }
        },
    }
}
