//! `agwire run <URL>`.

use std::io::Write;
use std::process::ExitCode;

use agwire_client::core::apply::RunEnd;
use agwire_client::core::{Message, RunAgentInput, Tool};
use agwire_client::{Accept, Client};
use serde_json::{Value, json};

use crate::render::Renderer;

/// Arguments of `agwire run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// The agent's endpoint (POST), e.g. http://127.0.0.1:8000/agentic_chat.
    url: String,
    /// A user message to send (repeat for several, in order).
    #[arg(short, long = "message", value_name = "TEXT")]
    messages: Vec<String>,
    /// The state to send: JSON, or @FILE.
    #[arg(long, value_name = "JSON|@FILE")]
    state: Option<String>,
    /// Frontend tools the agent may call: a JSON array of tools, or @FILE.
    #[arg(long, value_name = "JSON|@FILE")]
    tools: Option<String>,
    /// `forwardedProps` to send: JSON, or @FILE (agwire serve needs
    /// `{"runtime_mode":"chat"}`).
    #[arg(long, value_name = "JSON|@FILE")]
    forwarded_props: Option<String>,
    /// Thread id (default: a new UUID).
    #[arg(long)]
    thread_id: Option<String>,
    /// Run id (default: a new UUID).
    #[arg(long)]
    run_id: Option<String>,
    /// Extra request header, `Name: value` (repeatable).
    #[arg(short = 'H', long = "header", value_name = "NAME: VALUE")]
    headers: Vec<String>,
    /// Bearer token for `Authorization`.
    #[arg(long, env = "AGWIRE_BEARER_TOKEN")]
    bearer: Option<String>,
    /// Print each event as one JSON line instead of rendering it.
    #[arg(long)]
    json: bool,
    /// Ask for protobuf instead of SSE.
    #[arg(long)]
    proto: bool,
    /// Show events as received, without the official client's verification.
    #[arg(long)]
    no_verify: bool,
}

/// A JSON argument given inline or as `@file`.
fn json_arg(what: &str, arg: &str) -> Result<Value, String> {
    let text = match arg.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).map_err(|e| format!("--{what} {path}: {e}"))?,
        None => arg.to_owned(),
    };
    serde_json::from_str(&text).map_err(|e| format!("--{what}: not JSON: {e}"))
}

fn input(args: &RunArgs) -> Result<RunAgentInput, String> {
    let new_id = || uuid::Uuid::new_v4().to_string();
    let mut input = RunAgentInput::new(
        args.thread_id.clone().unwrap_or_else(new_id),
        args.run_id.clone().unwrap_or_else(new_id),
    );
    input.messages = args
        .messages
        .iter()
        .enumerate()
        .map(|(i, text)| {
            serde_json::from_value::<Message>(
                json!({"id": format!("user-{}", i + 1), "role": "user", "content": text}),
            )
            .map_err(|e| e.to_string())
        })
        .collect::<Result<_, _>>()?;
    input.state = Some(match &args.state {
        Some(state) => json_arg("state", state)?,
        None => json!({}),
    });
    if let Some(tools) = &args.tools {
        input.tools = serde_json::from_value::<Vec<Tool>>(json_arg("tools", tools)?)
            .map_err(|e| format!("--tools: {e}"))?;
    }
    input.forwarded_props = Some(match &args.forwarded_props {
        Some(props) => json_arg("forwarded-props", props)?,
        None => json!({}),
    });
    input.protocol_version = Some(agwire_client::core::PROTOCOL_VERSION.to_owned());
    Ok(input)
}

fn client(args: &RunArgs) -> Result<Client, String> {
    let mut builder = Client::builder(&args.url)
        .accept(if args.proto {
            Accept::Proto
        } else {
            Accept::Sse
        })
        .verify(!args.no_verify);
    for header in &args.headers {
        let (name, value) = header
            .split_once(':')
            .ok_or_else(|| format!("--header '{header}': expected 'Name: value'"))?;
        builder = builder.header(name.trim(), value.trim());
    }
    if let Some(token) = &args.bearer {
        builder = builder.bearer_token(token);
    }
    builder.build().map_err(|e| e.to_string())
}

/// Runs the agent, writing to `out`. Exit code 0 when the run finished, 1
/// when it ended in error (the agent's, the transport's or the protocol's).
pub(crate) async fn run(args: RunArgs, out: &mut dyn Write) -> Result<ExitCode, String> {
    let input = input(&args)?;
    let client = client(&args)?;
    let mut stream = match client.run(&input).await {
        Ok(stream) => stream,
        Err(error) => {
            writeln!(out, "✘ {error}").map_err(|e| e.to_string())?;
            return Ok(ExitCode::FAILURE);
        }
    };
    let abort = stream.abort_handle();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            abort.abort();
        }
    });
    let mut renderer = Renderer::default();
    let mut failed = None;
    while let Some(next) = stream.next().await {
        let written = match next {
            Ok(event) if args.json => writeln!(out, "{}", event.to_json()),
            Ok(event) => renderer.event(&event, out),
            Err(error) => {
                failed = Some(error);
                break;
            }
        };
        written
            .and_then(|()| out.flush())
            .map_err(|e| e.to_string())?;
    }
    ctrl_c.abort();
    if let Some(error) = failed {
        writeln!(out, "\n✘ {error}").map_err(|e| e.to_string())?;
        return Ok(ExitCode::FAILURE);
    }
    Ok(match &stream.session().last_run {
        Some(RunEnd::Finished { .. }) => ExitCode::SUCCESS,
        // Without verification nothing is folded: judge by the events seen.
        None if args.no_verify => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agwire_server::{Agent, AgentEndpoint, AgentError, RunContext};
    use clap::Parser;

    struct Weather;
    impl Agent for Weather {
        async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
            let call = ctx
                .tool_call("get_weather", &json!({"city": "Lisbon"}))
                .await?;
            ctx.tool_result(&call, "21 °C").await?;
            let asked = input.messages.len();
            ctx.say_streamed(["You sent ", &asked.to_string(), " messages."])
                .await?;
            ctx.set_state(json!({"seen": input.state})).await?;
            Ok(())
        }
    }

    struct Fails;
    impl Agent for Fails {
        async fn run(&self, _: RunAgentInput, _: &mut RunContext) -> Result<(), AgentError> {
            Err(AgentError::new("model unavailable").with_code("upstream"))
        }
    }

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: RunArgs,
    }

    async fn serve() -> std::net::SocketAddr {
        let app = axum::Router::new()
            .route_service("/weather", AgentEndpoint::new(Weather))
            .route_service("/fails", AgentEndpoint::new(Fails));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    }

    async fn agwire_run(argv: &[&str]) -> (ExitCode, String) {
        let cli = Cli::try_parse_from(std::iter::once("run").chain(argv.iter().copied())).unwrap();
        let mut out = Vec::new();
        let code = run(cli.args, &mut out).await.unwrap();
        (code, String::from_utf8(out).unwrap())
    }

    #[tokio::test]
    async fn renders_a_real_run_and_exits_by_outcome() {
        let addr = serve().await;
        let url = format!("http://{addr}/weather");
        for proto in [false, true] {
            let mut argv = vec![
                url.as_str(),
                "-m",
                "hi",
                "-m",
                "again",
                "--state",
                r#"{"a":1}"#,
                "--run-id",
                "r1",
                "--thread-id",
                "t1",
            ];
            if proto {
                argv.push("--proto");
            }
            let (code, text) = agwire_run(&argv).await;
            assert_eq!(code, ExitCode::SUCCESS);
            assert_eq!(
                text,
                "▶ run r1 (thread t1)\n→ get_weather({\"city\":\"Lisbon\"})\n  ↳ 21 °C\nassistant: You sent 2 messages.\nstate Δ [{\"op\":\"remove\",\"path\":\"/a\"},{\"op\":\"add\",\"path\":\"/seen\",\"value\":{\"a\":1}}]\n✔ finished\n"
            );
        }
        let (code, text) =
            agwire_run(&[&url, "--json", "--run-id", "r2", "--thread-id", "t1"]).await;
        assert_eq!(code, ExitCode::SUCCESS);
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["type"], "RUN_STARTED");
        assert_eq!(first["protocolVersion"], "1.1");
        assert!(
            text.lines()
                .all(|l| serde_json::from_str::<Value>(l).is_ok())
        );

        let (code, text) = agwire_run(&[&format!("http://{addr}/fails")]).await;
        assert_eq!(code, ExitCode::FAILURE);
        assert!(
            text.ends_with("✘ error: model unavailable (upstream)\n"),
            "{text}"
        );

        let (code, text) = agwire_run(&[&format!("http://{addr}/missing")]).await;
        assert_eq!(code, ExitCode::FAILURE);
        assert!(text.starts_with("✘ HTTP 404"), "{text}");
    }

    #[tokio::test]
    async fn bad_arguments_are_errors_before_anything_is_sent() {
        for argv in [
            vec!["http://127.0.0.1:1/x", "--state", "{not json"],
            vec![
                "http://127.0.0.1:1/x",
                "--tools",
                "@/nonexistent/tools.json",
            ],
            vec!["http://127.0.0.1:1/x", "-H", "no-colon"],
            vec!["not a url"],
        ] {
            let cli =
                Cli::try_parse_from(std::iter::once("run").chain(argv.iter().copied())).unwrap();
            let mut out = Vec::new();
            assert!(run(cli.args, &mut out).await.is_err(), "{argv:?}");
            assert!(out.is_empty());
        }
    }
}
