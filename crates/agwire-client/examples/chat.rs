//! Chat with any AG-UI agent in the terminal: each line you type is a turn;
//! the agent's text streams back as it is written, and the conversation
//! (messages and state) is kept from turn to turn.
//!
//! ```sh
//! cargo run -p agwire-client --example chat -- http://127.0.0.1:8080/api/v1/agui
//! cargo run -p agwire-client --example chat -- https://example.com/agent --token "$TOKEN"
//! ```
//!
//! `/state` prints the state the agent keeps; `/quit` (or end of input) ends.

use std::io::{BufRead, Write};

use agwire_client::core::Event;
use agwire_client::{Client, Error, HttpAgent, RunOptions};

/// Reads turns from `input` until it ends, writing the agent's text to `out`.
pub(crate) async fn chat(
    agent: &mut HttpAgent,
    input: impl BufRead,
    out: &mut impl Write,
) -> Result<(), Error> {
    for line in input.lines() {
        let line = line.map_err(|e| Error::Config(format!("reading input: {e}")))?;
        match line.trim() {
            "" => continue,
            "/quit" => break,
            "/state" => {
                let _ = writeln!(out, "{}", agent.state());
                continue;
            }
            text => {
                agent.add_user_message(text);
            }
        }
        let mut run = agent.run_stream(RunOptions::new()).await?;
        while let Some(event) = run.next().await {
            match event? {
                Event::TextMessageContent(text) => {
                    let _ = write!(out, "{}", text.delta);
                    let _ = out.flush();
                }
                Event::TextMessageEnd(_) => {
                    let _ = writeln!(out);
                }
                Event::RunError(error) => {
                    let _ = writeln!(out, "[the run failed: {}]", error.message);
                }
                _ => {}
            }
        }
    }
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let url = args.next().ok_or("usage: chat URL [--token TOKEN]")?;
    let mut client = Client::builder(url);
    if let (Some(flag), Some(token)) = (args.next(), args.next())
        && flag == "--token"
    {
        client = client.bearer_token(token);
    }
    let mut agent = HttpAgent::builder(client.build()?).build();
    chat(&mut agent, std::io::stdin().lock(), &mut std::io::stdout()).await?;
    Ok(())
}
