//! `/openapi.json`, generated: each handler's `#[utoipa::path]` names its
//! route, parameters and answers, and the router is built from those same
//! annotations (`utoipa_axum::routes!`), so the document lists exactly the
//! routes the service answers. Response bodies are the types the handlers
//! serialize. Request bodies that the service reads by hand (the agent-run API's
//! rules come in a fixed order with fixed messages, which a derived
//! deserializer cannot give) are described by the types in this file.
//!
//! What every operation shares is added here once ([`Common`]): the
//! `default` error answer, the `401` of the operations behind a token, and
//! the bearer scheme.

use utoipa::Modify;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{
    ContentBuilder, OpenApi, Ref, RefOr, ResponseBuilder, SecurityRequirement, path::Operation,
};

use super::error::Detail;

/// The document's frame: title, server, shared components.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "agwire serve",
        version = env!("CARGO_PKG_VERSION"),
        description = "The agwire agent-run service: the agent-run API (runs validated before anything is written, streamed resumably), a standard AG-UI endpoint, history, attachments, profile, automation jobs, calendar. Prose: docs/API.md."
    ),
    servers((url = "http://127.0.0.1:8080")),
    components(schemas(Detail)),
    modifiers(&Common)
)]
pub(super) struct ApiDoc;

/// A run's event stream, as an answer.
pub(super) const STREAM: &str = "The run's AG-UI event stream: SSE (`text/event-stream`, every frame `id: <seq>`, `: keep-alive` comments) or protobuf (`application/vnd.ag-ui.event+proto`, 4-byte big-endian length-prefixed frames), by `Accept`. Ends after RUN_FINISHED or RUN_ERROR.";

/// Operations anyone may call: liveness, this document, and the signed
/// attachment GET (its signature is its credential).
pub(super) const PUBLIC: [&str; 3] = ["health", "openapi", "downloadAttachment"];

/// What every operation shares.
struct Common;

/// The answer of every error not listed on an operation.
const DEFAULT_ERROR: &str = "Any other error, as `{\"detail\": ...}`: 400 for a request that cannot be read (bad path bytes, a body cut short, a NUL character `%00` in the URL), 403 for a host the service is not reached by (without auth: DNS rebinding) or a state change another origin's page sent (docs/SECURITY.md), 408 when the request takes longer than `http.request_timeout_seconds`, 413 over a body limit, 415 for a JSON body not sent as `application/json`, 422 for a NUL character in a JSON body, 431 over the header limits, 405 for another method, 503 when the peer has used its share of connections.";

const UNAUTHORIZED: &str = "Missing, malformed, expired or foreign bearer token (with auth configured). `WWW-Authenticate: Bearer`.";

fn detail_answer(description: &str) -> RefOr<utoipa::openapi::Response> {
    ResponseBuilder::new()
        .description(description)
        .content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("Detail")))
                .build(),
        )
        .build()
        .into()
}

impl Modify for Common {
    fn modify(&self, openapi: &mut OpenApi) {
        // The frame is modified before the routes join it; this runs again
        // on the whole document in `finish`.
        if let Some(components) = openapi.components.as_mut() {
            components.add_security_scheme(
                "bearer",
                SecurityScheme::Http(
                    HttpBuilder::new()
                        .scheme(HttpAuthScheme::Bearer)
                        .bearer_format("JWT")
                        .description(Some(
                            "HS256 with `auth.jwt_secret`, or RS256/ES256/EdDSA with keys from `auth.jwks_url`; sub = user id; exp required; aud/iss when configured. Without either there is one local user and no token is needed.",
                        ))
                        .build(),
                ),
            );
        }
        openapi.security = Some(vec![SecurityRequirement::new(
            "bearer",
            Vec::<String>::new(),
        )]);
        for item in openapi.paths.paths.values_mut() {
            let operations = [
                &mut item.get,
                &mut item.post,
                &mut item.patch,
                &mut item.put,
                &mut item.delete,
            ];
            for operation in operations.into_iter().flatten() {
                shared_answers(operation);
            }
        }
    }
}

/// Adds the answers an operation shares with the others.
fn shared_answers(operation: &mut Operation) {
    let public = operation
        .operation_id
        .as_deref()
        .is_some_and(|id| PUBLIC.contains(&id));
    let answers = &mut operation.responses.responses;
    answers
        .entry("default".into())
        .or_insert_with(|| detail_answer(DEFAULT_ERROR));
    if public {
        operation.security = Some(Vec::new());
    } else {
        answers
            .entry("401".into())
            .or_insert_with(|| detail_answer(UNAUTHORIZED));
    }
}

/// What a created resource's answer leads to (`$response.body#/…` into
/// another operation's parameter): clients and the API fuzzer's stateful
/// phase follow these.
const LINKS: [(&str, &str, &str, &str, &[&str]); 2] = [
    (
        "createRun",
        "202",
        "path.runId",
        "$response.body#/runId",
        &["getRun", "runEvents", "cancelRun"],
    ),
    (
        "createJob",
        "201",
        "path.id",
        "$response.body#/id",
        &["getJob", "patchJob", "deleteJob", "jobRuns"],
    ),
];

/// Adds [`LINKS`]. (Written as JSON: utoipa 5.5's `Link` serializes its
/// operation id as `operation_id`, which OpenAPI does not know.)
fn add_links(document: &mut serde_json::Value) {
    let Some(paths) = document.get_mut("paths").and_then(|p| p.as_object_mut()) else {
        return;
    };
    for operation in paths
        .values_mut()
        .filter_map(|item| item.as_object_mut())
        .flat_map(|item| item.values_mut())
    {
        for (from, status, parameter, value, targets) in LINKS {
            if operation["operationId"] != from {
                continue;
            }
            if let Some(answer) = operation["responses"][status].as_object_mut() {
                let links: serde_json::Map<String, serde_json::Value> = targets
                    .iter()
                    .map(|target| {
                        let link = serde_json::json!({
                            "operationId": target,
                            "parameters": {parameter: value},
                        });
                        ((*target).to_owned(), link)
                    })
                    .collect();
                answer.insert("links".into(), links.into());
            }
        }
    }
}

/// The finished document, as served.
pub(super) fn finish(mut openapi: OpenApi) -> String {
    Common.modify(&mut openapi);
    // Serializing plain data cannot fail; an empty document would be caught
    // by the tests that read it.
    let mut document = serde_json::to_value(&openapi).unwrap_or_default();
    add_links(&mut document);
    document.to_string()
}

/// Request bodies the handlers read by hand, described (never built).
pub(super) mod bodies {
    #![allow(
        dead_code,
        reason = "descriptions for the document; the handlers read these bodies by hand"
    )]
    use serde::Deserialize;
    use utoipa::ToSchema;

    /// AG-UI 1.1 `RunAgentInput` as the service reads it (snake_case aliases
    /// accepted). The agent-run API's rules, in their order, are in
    /// [`crate::validate`]; `/api/v1/agui` reads it as agwire-core's
    /// `RunAgentInput`.
    #[derive(ToSchema, Deserialize)]
    #[schema(as = RunAgentInput)]
    #[serde(rename_all = "camelCase")]
    pub(in crate::api) struct RunAgentInputBody {
        thread_id: String,
        run_id: String,
        parent_run_id: Option<String>,
        /// Any JSON value.
        #[schema(value_type = Option<Object>)]
        state: Option<serde_json::Value>,
        messages: Vec<MessageBody>,
        tools: Option<Vec<ToolBody>>,
        context: Option<Vec<ContextBody>>,
        forwarded_props: Option<ForwardedProps>,
        protocol_version: Option<String>,
        #[schema(value_type = Option<Vec<Object>>)]
        resume: Option<Vec<serde_json::Value>>,
    }

    /// A message (its other fields by role, as AG-UI defines them).
    #[derive(ToSchema, Deserialize)]
    #[schema(as = Message)]
    struct MessageBody {
        id: String,
        role: Role,
    }

    /// A message's role.
    #[derive(ToSchema, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum Role {
        User,
        Assistant,
        System,
        Developer,
        Tool,
        Reasoning,
        Activity,
    }

    /// A frontend tool.
    #[derive(ToSchema, Deserialize)]
    #[schema(as = Tool)]
    struct ToolBody {
        name: String,
        description: String,
        /// A JSON Schema.
        #[schema(value_type = Object)]
        parameters: serde_json::Value,
    }

    /// A context item.
    #[derive(ToSchema, Deserialize)]
    #[schema(as = Context)]
    struct ContextBody {
        description: String,
        value: String,
    }

    /// Exactly `runtime_mode` and optional `client_time`.
    #[derive(ToSchema, Deserialize)]
    struct ForwardedProps {
        runtime_mode: Option<RuntimeModeName>,
        client_time: Option<ClientTime>,
    }

    /// How a run executes.
    #[derive(ToSchema, Deserialize)]
    #[serde(rename_all = "lowercase")]
    enum RuntimeModeName {
        Chat,
        Automation,
    }

    /// The client's clock when it sent the run.
    #[derive(ToSchema, Deserialize)]
    struct ClientTime {
        /// An IANA time zone.
        device_timezone: String,
        #[schema(format = DateTime)]
        client_now_iso: String,
        client_epoch_ms: i64,
    }

    /// `PATCH /api/v1/me/profile`: settings to change (`null` clears one).
    #[derive(ToSchema, Deserialize)]
    pub(in crate::api) struct ProfilePatch {
        /// `timezone` (IANA), `locale` (BCP 47), and anything else the front end
        /// keeps.
        #[schema(value_type = Object)]
        settings: serde_json::Value,
    }

    /// A job's fields (all but `config` and `enabled` required when creating;
    /// any subset when changing).
    #[derive(ToSchema, Deserialize)]
    pub(in crate::api) struct JobInput {
        name: Option<String>,
        schedule: Option<Schedule>,
        /// An IANA time zone.
        timezone: Option<String>,
        prompt: Option<String>,
        config: Option<JobConfig>,
        enabled: Option<bool>,
    }

    /// When a job runs.
    #[derive(ToSchema, Deserialize)]
    #[serde(untagged)]
    enum Schedule {
        /// minute hour day-of-month month day-of-week, in the job's time zone.
        Cron { cron: String },
        /// A fixed interval of a minute to a century.
        Every {
            #[schema(minimum = 60, maximum = 3_153_600_000.0)]
            every_seconds: i64,
        },
    }

    /// How a job's runs execute.
    #[derive(ToSchema, Deserialize)]
    struct JobConfig {
        agent: Option<String>,
        enabled_tools: Option<Vec<String>>,
        #[schema(value_type = Option<Vec<Object>>)]
        context: Option<Vec<serde_json::Value>>,
    }

    /// A multipart upload.
    #[derive(ToSchema, Deserialize)]
    pub(in crate::api) struct Upload {
        file: Binary,
    }

    /// Bytes.
    #[derive(ToSchema, Deserialize)]
    #[schema(format = Binary)]
    pub(in crate::api) struct Binary(String);

    /// One server-sent event of a run's AG-UI stream (each read on its own, as
    /// OpenAPI 3.2's itemSchema says): `id` is the event's sequence number in
    /// the run's log (send it back as `Last-Event-ID` to resume), `data` one
    /// AG-UI event as JSON.
    #[derive(ToSchema, Deserialize)]
    pub(in crate::api) struct SseFrame {
        #[schema(pattern = "^[1-9][0-9]*$")]
        id: String,
        #[schema(content_media_type = "application/json")]
        data: String,
        event: Option<String>,
    }
}
