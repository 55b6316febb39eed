//! `agwire check <URL>`: agwire-check's conformance kit on the command line.

use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::time::Duration;

use agwire_check::{Check, Progress, Scenario, Verdict};

/// Arguments of `agwire check`.
#[derive(Debug, clap::Args)]
pub(crate) struct CheckArgs {
    /// The agent's endpoint (POST), e.g. http://127.0.0.1:8000/agentic_chat.
    url: String,
    /// Ask for protobuf instead of SSE in the run scenarios.
    #[arg(long)]
    proto: bool,
    /// Extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// Bearer token for `Authorization`.
    #[arg(long, env = "AGWIRE_BEARER_TOKEN")]
    bearer: Option<String>,
    /// Run only these scenarios (repeatable or comma-separated): text,
    /// history, frontend-tools, state, interrupt, cancel, bad-input,
    /// negotiation, resume, capabilities.
    #[arg(long = "scenario", value_name = "NAME", value_delimiter = ',')]
    scenarios: Vec<String>,
    /// Longest wait for one answer, in seconds (also how long an aborted
    /// run may keep its thread busy).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    timeout: f64,
    /// `forwardedProps` of every run: JSON.
    #[arg(long, value_name = "JSON")]
    forwarded_props: Option<String>,
    /// Where the server publishes its AgentCapabilities document.
    #[arg(long, value_name = "URL")]
    capabilities: Option<String>,
    /// Print the report as JSON instead of the table.
    #[arg(long)]
    json: bool,
    /// Also write the report as JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    junit: Option<std::path::PathBuf>,
}

fn build(args: &CheckArgs) -> Result<Check, String> {
    let mut check = Check::new(&args.url).proto(args.proto);
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(format!(
            "--timeout {}: a positive number of seconds",
            args.timeout
        ));
    }
    check = check.timeout(Duration::from_secs_f64(args.timeout));
    for header in &args.headers {
        let (name, value) = header
            .split_once(':')
            .ok_or_else(|| format!("--header '{header}': expected 'Name: value'"))?;
        check = check.header(name.trim(), value.trim());
    }
    if let Some(token) = &args.bearer {
        check = check.bearer_token(token);
    }
    if !args.scenarios.is_empty() {
        let chosen = args
            .scenarios
            .iter()
            .map(|name| {
                Scenario::from_name(name.trim()).ok_or_else(|| {
                    let names: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
                    format!("--scenario {name}: not one of {}", names.join(", "))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        check = check.scenarios(chosen);
    }
    if let Some(props) = &args.forwarded_props {
        let props =
            serde_json::from_str(props).map_err(|e| format!("--forwarded-props: not JSON: {e}"))?;
        check = check.forwarded_props(props);
    }
    if let Some(url) = &args.capabilities {
        check = check.capabilities_url(url);
    }
    Ok(check)
}

/// Runs the check, writing the report to `out` and progress to stderr. Exit
/// code 0 when nothing broke a rule, 1 on any violation; `Err` (exit 2) for
/// arguments that cannot be used or a server that is not there.
pub(crate) async fn check(args: CheckArgs, out: &mut dyn Write) -> Result<ExitCode, String> {
    let check = build(&args)?;
    let terminal = std::io::stderr().is_terminal();
    let mut progress = |p: Progress| {
        let mut err = std::io::stderr();
        let _ = match p {
            Progress::Started {
                index,
                total,
                scenario,
            } if terminal => write!(err, "\r\x1b[2K[{index}/{total}] {}…", scenario.name()),
            Progress::Started {
                index,
                total,
                scenario,
            } => writeln!(err, "[{index}/{total}] {}", scenario.name()),
            Progress::Finished { .. } if terminal => write!(err, "\r\x1b[2K"),
            Progress::Finished { scenario, verdict } => writeln!(
                err,
                "      {}: {}",
                scenario.name(),
                match verdict {
                    Verdict::Pass => "pass",
                    Verdict::Fail => "FAIL",
                    _ => "not exercised",
                }
            ),
            _ => Ok(()),
        };
    };
    let report = check
        .run_with_progress(&mut progress)
        .await
        .map_err(|e| e.to_string())?;
    let text = if args.json {
        report.to_json() + "\n"
    } else {
        report.to_table()
    };
    out.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    if let Some(path) = &args.junit {
        std::fs::write(path, report.to_junit())
            .map_err(|e| format!("--junit {}: {e}", path.display()))?;
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: CheckArgs,
    }

    fn args(argv: &[&str]) -> CheckArgs {
        Cli::try_parse_from(std::iter::once("check").chain(argv.iter().copied()))
            .unwrap()
            .args
    }

    #[tokio::test]
    async fn bad_arguments_are_errors_before_anything_is_sent() {
        for argv in [
            vec!["http://127.0.0.1:1/x", "--scenario", "nope"],
            vec!["http://127.0.0.1:1/x", "-H", "no-colon"],
            vec!["http://127.0.0.1:1/x", "--forwarded-props", "{"],
            vec!["http://127.0.0.1:1/x", "--timeout", "0"],
            vec!["not a url"],
        ] {
            let mut out = Vec::new();
            assert!(check(args(&argv), &mut out).await.is_err(), "{argv:?}");
            assert!(out.is_empty());
        }
    }

    #[tokio::test]
    async fn judges_a_real_endpoint_and_writes_each_format() {
        let app = agwire_testkit::dojo::router(|e| e);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let url = format!("http://{addr}/agentic_chat");
        let dir = std::env::temp_dir().join(format!("agwire-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junit = dir.join("report.xml");
        let mut out = Vec::new();
        let code = check(
            args(&[
                &url,
                "--scenario",
                "text,bad-input",
                "--junit",
                junit.to_str().unwrap(),
            ]),
            &mut out,
        )
        .await
        .unwrap();
        let table = String::from_utf8(out).unwrap();
        assert_eq!(code, ExitCode::SUCCESS, "{table}");
        assert!(table.contains("\nPASS: "), "{table}");
        let xml = std::fs::read_to_string(&junit).unwrap();
        assert!(
            xml.contains("<testcase classname=\"scenario\" name=\"bad-input\""),
            "{xml}"
        );
        let mut out = Vec::new();
        check(args(&[&url, "--scenario", "text", "--json"]), &mut out)
            .await
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(json["scenarios"][0]["verdict"], "pass");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
