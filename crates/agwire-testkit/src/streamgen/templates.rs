//! The error templates of `@ag-ui/client` 1.0.0, which a stream's intended
//! error is matched against.

/// One error template of the TypeScript client (verify, chunk expansion,
/// enforcement, apply). An error matches the first entry whose fragments it all
/// contains; more specific entries come first.
#[derive(Debug, Clone, Copy)]
pub struct TsTemplate {
    /// Its name (`stage.what`), as [`GeneratedStream::template`](super::GeneratedStream::template) names it.
    pub key: &'static str,
    /// The literal pieces of the message, all of which a matching error
    /// contains.
    pub fragments: &'static [&'static str],
    /// Why no stream through `runAgent` can reach it, when that is the case.
    pub unreachable: Option<&'static str>,
}

const ZOD_SHADOWS: &str = "shadowed: the generated Zod validator (enforcement) rejects the null \
     or missing value before verification runs";

/// Every error template of `@ag-ui/client` 1.0.0 that a replayed stream could
/// conceivably produce.
pub const TS_TEMPLATES: &[TsTemplate] = &[
    t(
        "verify.run_errored",
        &["The run has already errored with 'RUN_ERROR'"],
    ),
    t(
        "verify.run_finished",
        &["The run has already finished with 'RUN_FINISHED'"],
    ),
    t("verify.first_event", &["First event must be 'RUN_STARTED'"]),
    t("verify.run_active", &["while a run is still active"]),
    u(
        "verify.message_null_tag",
        &["Cannot send a message (id '", "with 'subagentRunId: null'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.interrupt_null_tag",
        &["with an interrupt (id '", "carrying 'subagentRunId: null'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.event_null_tag",
        &["with 'subagentRunId: null'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.interrupt_ids_null",
        &["with 'outcome.interruptIds: null'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.lifecycle_null_field",
        &[": null'. The field is optional"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.subagent_outcome_type",
        &["The outcome is either"],
        "shadowed: enforcement strips an unknown outcome member (absent = success) and Zod rejects a non-object",
    ),
    u(
        "verify.interrupt_ids_non_string",
        &["non-string entry in 'outcome.interruptIds'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.subagent_without_id",
        &["without a 'subagentRunId'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.subagent_without_name",
        &["without a 'name'"],
        ZOD_SHADOWS,
    ),
    u(
        "verify.subagent_error_without_message",
        &["without a 'message'"],
        ZOD_SHADOWS,
    ),
    t(
        "verify.text_duplicate",
        &["A text message with ID '", "is already in progress"],
    ),
    t(
        "verify.text_content_unstarted",
        &["Cannot send 'TEXT_MESSAGE_CONTENT' event: No active text message found"],
    ),
    t(
        "verify.text_end_unstarted",
        &["Cannot send 'TEXT_MESSAGE_END' event: No active text message found"],
    ),
    t("verify.tool_duplicate", &["A tool call with ID '"]),
    t(
        "verify.tool_args_unstarted",
        &["Cannot send 'TOOL_CALL_ARGS' event: No active tool call found"],
    ),
    t(
        "verify.tool_end_unstarted",
        &["Cannot send 'TOOL_CALL_END' event: No active tool call found"],
    ),
    t(
        "verify.tool_parent_tag",
        &["does not match its parent message"],
    ),
    t(
        "verify.tool_reopen_parent_owner",
        &["but its parent message"],
    ),
    t(
        "verify.tag_message",
        &["does not match the message '", "opener's subagent"],
    ),
    t(
        "verify.tag_tool_call",
        &["does not match the tool call '", "opener's subagent"],
    ),
    t(
        "verify.tag_reasoning",
        &[
            "does not match the reasoning message '",
            "opener's subagent",
        ],
    ),
    t(
        "verify.tag_activity",
        &["does not match the activity '", "opener's subagent"],
    ),
    t(
        "verify.step_duplicate",
        &["is already active for 'STEP_STARTED'"],
    ),
    t(
        "verify.step_other_owner",
        &["A step must be finished by whoever started it."],
    ),
    t("verify.step_unstarted", &["that was not started"]),
    t("verify.span_duplicate", &["A reasoning span with ID '"]),
    t(
        "verify.reasoning_duplicate",
        &["A reasoning message with ID '"],
    ),
    t(
        "verify.span_end_unstarted",
        &["No active reasoning span found"],
    ),
    t(
        "verify.reasoning_content_unstarted",
        &["Cannot send 'REASONING_MESSAGE_CONTENT' event: No active reasoning message found"],
    ),
    t(
        "verify.reasoning_end_unstarted",
        &["Cannot send 'REASONING_MESSAGE_END' event: No active reasoning message found"],
    ),
    t(
        "verify.subagent_duplicate",
        &["is already active. Finish it with 'SUBAGENT_FINISHED' first."],
    ),
    t(
        "verify.subagent_reused",
        &["has already finished in this run"],
    ),
    t(
        "verify.subagent_parent_unknown",
        &["has not been started in this run"],
    ),
    t(
        "verify.subagent_terminal_unknown",
        &["no active subagent found with ID"],
    ),
    t(
        "verify.finish_open_steps",
        &["while steps are still active"],
    ),
    t(
        "verify.finish_open_text",
        &["while text messages are still active"],
    ),
    t(
        "verify.finish_open_reasoning_messages",
        &["while reasoning messages are still active"],
    ),
    t(
        "verify.finish_open_reasoning_spans",
        &["while reasoning spans are still active"],
    ),
    t(
        "verify.finish_open_tool_calls",
        &["while tool calls are still active"],
    ),
    t(
        "verify.finish_open_subagents",
        &["while subagents are still active"],
    ),
    t(
        "chunk.lane_owner",
        &[
            "chunk subagentRunId '",
            "does not match the open stream's subagent",
        ],
    ),
    t("chunk.conflict_role", &["chunk role '"]),
    t("chunk.conflict_name", &["chunk name '"]),
    t("chunk.conflict_tool_name", &["chunk toolCallName '"]),
    t("chunk.conflict_parent", &["chunk parentMessageId '"]),
    t("chunk.ambiguous", &["Ambiguous ", "lanes have an open"]),
    t(
        "chunk.text_without_id",
        &["First TEXT_MESSAGE_CHUNK must have a messageId"],
    ),
    t(
        "chunk.tool_without_id",
        &["First TOOL_CALL_CHUNK must have a toolCallId"],
    ),
    t(
        "chunk.tool_without_name",
        &["First TOOL_CALL_CHUNK must have a toolCallName"],
    ),
    t(
        "chunk.reasoning_without_id",
        &["First REASONING_MESSAGE_CHUNK must have a messageId"],
    ),
    t("enforce.zod", &[ZOD_MARKER]),
    u(
        "enforce.no_validator",
        &["No validator for recognised event type"],
        "internal guard: every known event type has a generated validator",
    ),
    u(
        "enforce.stripper_internal",
        &["the stripper found the whole value unrecognisable"],
        "internal guard: a known event type always selects its own schema",
    ),
    u(
        "apply.chunk_not_expanded",
        &["must be transformed before being applied"],
        "internal guard: chunk expansion always runs before apply",
    ),
];

const fn t(key: &'static str, fragments: &'static [&'static str]) -> TsTemplate {
    TsTemplate {
        key,
        fragments,
        unreachable: None,
    }
}

const fn u(key: &'static str, fragments: &'static [&'static str], why: &'static str) -> TsTemplate {
    TsTemplate {
        key,
        fragments,
        unreachable: Some(why),
    }
}

/// What every Zod (enforcement) rejection of `@ag-ui/client` contains: the issue
/// list serialised as pretty JSON.
pub const ZOD_MARKER: &str = "\"code\": \"";

/// The template an error message matches, if any.
pub fn classify_ts_error(message: &str) -> Option<&'static str> {
    TS_TEMPLATES
        .iter()
        .find(|t| t.fragments.iter().all(|f| message.contains(f)))
        .map(|t| t.key)
}

pub(super) fn template(key: &str) -> &'static TsTemplate {
    TS_TEMPLATES
        .iter()
        .find(|t| t.key == key)
        .unwrap_or_else(|| panic!("no TS template {key}"))
}
