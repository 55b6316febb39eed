//! The `agwire` binary.
//!
//! - `agwire run <URL>`: stream a run of any AG-UI endpoint in the terminal.
//! - `agwire serve`: the agent-run service on embedded SQLite.

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod render;
mod run;
mod serve;

/// AG-UI from the command line.
#[derive(Debug, Parser)]
#[command(name = "agwire", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run an AG-UI agent and stream its events in the terminal.
    Run(run::RunArgs),
    /// Serve the agent-run service (127.0.0.1:8080, data in ./agwire-data).
    Serve(serve::ServeArgs),
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
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
        Command::Serve(args) => match serve::serve(args).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                let _ = writeln!(std::io::stderr(), "agwire serve: {error}");
                ExitCode::FAILURE
            }
        },
    }
}
