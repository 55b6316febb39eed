//! An LLM agent in your axum app: an OpenAI-compatible model with two tools
//! — `save_note`, a backend tool this server runs for the signed-in user,
//! and whatever frontend tools the client declares (handed back to it) —
//! mounted at `/agent` beside the app's own routes, behind the app's own
//! auth middleware, which passes the user to the agent.
//!
//! ```sh
//! OPENAI_API_KEY=sk-... cargo run -p agwire-llm --example axum_app
//! curl -N localhost:3000/agent -H 'authorization: Bearer demo-token' \
//!   -H 'content-type: application/json' \
//!   -d '{"threadId":"t1","runId":"r1","messages":[{"id":"u1","role":"user","content":"Note: window seat"}]}'
//! ```
//!
//! `OPENAI_BASE_URL` points it at any OpenAI-compatible server (Ollama:
//! `http://localhost:11434/v1`), `OPENAI_MODEL` picks the model,
//! `AGENT_TOKENS` (`token=user,token=user`) says who may call it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agwire_llm::agui::{ToolLoop, ToolSet};
use agwire_llm::{ChatModel, ChatRequest, OpenAiCompatible, OpenAiConfig};
use agwire_server::core::RunAgentInput;
use agwire_server::{Agent, AgentEndpoint, AgentError, RunContext};
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;

/// Who is asking: put in the request by [`auth`], read by the agent.
#[derive(Debug, Clone)]
pub(crate) struct User(pub(crate) String);

/// Each user's notes: what the backend tool writes.
pub(crate) type Notes = Arc<Mutex<HashMap<String, Vec<String>>>>;

/// `save_note`'s arguments: the model is given their JSON Schema.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct SaveNote {
    /// What to remember.
    note: String,
}

/// The agent: the model, told who the user is, with the user's own
/// `save_note` tool.
struct Assistant {
    model: Arc<dyn ChatModel>,
    notes: Notes,
}

impl Agent for Assistant {
    async fn run(&self, input: RunAgentInput, ctx: &mut RunContext) -> Result<(), AgentError> {
        let user = ctx
            .extension::<User>()
            .cloned()
            .ok_or_else(|| AgentError::new("no user").with_code("unauthenticated"))?;
        let notes = self.notes.clone();
        let owner = user.0.clone();
        let tools = ToolSet::new().typed_tool(
            "save_note",
            "Saves a note for the user; answers with all their notes.",
            move |args: SaveNote| {
                let (notes, owner) = (notes.clone(), owner.clone());
                async move {
                    let mut notes = notes.lock().map_err(|_| "the notes are unavailable")?;
                    let mine = notes.entry(owner).or_default();
                    mine.push(args.note);
                    Ok::<_, &str>(json!({ "notes": mine }))
                }
            },
        );
        let request = ChatRequest::from(&input).instructions(format!(
            "You are a concise assistant. You are talking to {}.",
            user.0
        ));
        ToolLoop::new(&*self.model)
            .tools(&tools)
            .run(request, ctx)
            .await?;
        Ok(())
    }
}

/// The app's own auth: a bearer token from `tokens` names the user, who
/// goes into the request's extensions; anything else is a 401.
async fn auth(
    State(tokens): State<Arc<HashMap<String, String>>>,
    mut request: Request,
    next: Next,
) -> Response {
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match token.and_then(|t| tokens.get(t)) {
        Some(user) => {
            let user = User(user.clone());
            request.extensions_mut().insert(user);
            next.run(request).await
        }
        None => (
            StatusCode::UNAUTHORIZED,
            Json(json!({"detail": "a bearer token is required"})),
        )
            .into_response(),
    }
}

/// The whole app: its own routes, and the agent behind auth.
pub(crate) fn app(
    model: Arc<dyn ChatModel>,
    tokens: HashMap<String, String>,
    notes: Notes,
) -> Router {
    let agent = Router::new()
        .route_service("/agent", AgentEndpoint::new(Assistant { model, notes }))
        .route_layer(middleware::from_fn_with_state(Arc::new(tokens), auth));
    Router::new()
        .route("/api/health", get(|| async { "ok" }))
        .merge(agent)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let config = OpenAiConfig::new(
        env("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        env("OPENAI_MODEL", "gpt-4o-mini"),
    )
    .api_key(env("OPENAI_API_KEY", ""));
    let tokens = env("AGENT_TOKENS", "demo-token=demo")
        .split(',')
        .filter_map(|pair| pair.split_once('='))
        .map(|(token, user)| (token.to_owned(), user.to_owned()))
        .collect();
    let app = app(
        Arc::new(OpenAiCompatible::new(config)?),
        tokens,
        Notes::default(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    axum::serve(listener, app).await?;
    Ok(())
}
