//! Malformed streams: one known field with a wrong JSON type, or a required
//! one missing.

use serde_json::{Value, json};

use super::generator::Gen;
use super::schema::Kind;

impl Gen {
    pub(super) fn malformed_stream(&mut self) {
        self.initial_context();
        if self.p(0.05) {
            self.feature("malformed_first_event");
        } else {
            self.prefix_runs();
            self.run_start(true);
            let n = self.range(0, 20);
            self.body(n);
        }
        let (label, ev) = self.malformed_event();
        self.checking = false;
        self.events.push(ev);
        self.fault_key = Some(label);
        self.tail();
    }

    fn malformed_event(&mut self) -> (&'static str, Value) {
        let mid = self.fresh("bad");
        let open_text = self.explicit(Kind::Text);
        let target = self.pick(&open_text).unwrap_or_else(|| mid.clone());
        match self.range(0, 36) {
            0 => (
                "malformed/delta_number",
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": target, "delta": 42}),
            ),
            1 => (
                "malformed/message_id_number",
                json!({"type": "TEXT_MESSAGE_START", "messageId": 7}),
            ),
            2 => (
                "malformed/missing_message_id",
                json!({"type": "TEXT_MESSAGE_START", "role": "assistant"}),
            ),
            3 => (
                "malformed/metadata_null",
                json!({"type": "CUSTOM", "name": "x", "value": 1, "metadata": null}),
            ),
            4 => (
                "malformed/metadata_array",
                json!({"type": "STATE_SNAPSHOT", "snapshot": {}, "metadata": ["x"]}),
            ),
            5 => (
                "malformed/timestamp_float",
                json!({"type": "RAW", "event": {}, "timestamp": 1.5}),
            ),
            6 => (
                "malformed/timestamp_string",
                json!({"type": "STEP_STARTED", "stepName": "s", "timestamp": "1700000000"}),
            ),
            7 => (
                "malformed/state_delta_not_array",
                json!({"type": "STATE_DELTA", "delta": {"op": "add", "path": "/a", "value": 1}}),
            ),
            8 => (
                "malformed/patch_path_not_pointer",
                json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "no-slash", "value": 1}]}),
            ),
            9 => (
                "malformed/patch_add_without_value",
                json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/x"}]}),
            ),
            10 => (
                "malformed/activity_content_array",
                json!({"type": "ACTIVITY_SNAPSHOT", "messageId": mid, "activityType": "PLAN", "content": [1, 2]}),
            ),
            11 => (
                "malformed/activity_content_null",
                json!({"type": "ACTIVITY_SNAPSHOT", "messageId": mid, "activityType": "PLAN", "content": null}),
            ),
            12 => (
                "malformed/interrupts_empty",
                json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id, "outcome": {"type": "interrupt", "interrupts": []}}),
            ),
            13 => (
                "malformed/tool_result_content_number",
                json!({"type": "TOOL_CALL_RESULT", "messageId": mid, "toolCallId": "c", "content": 12}),
            ),
            14 => (
                "malformed/tool_start_without_name",
                json!({"type": "TOOL_CALL_START", "toolCallId": mid}),
            ),
            15 => (
                "malformed/subagent_without_name",
                json!({"type": "SUBAGENT_STARTED", "subagentRunId": mid}),
            ),
            16 => (
                "malformed/subagent_id_null",
                json!({"type": "SUBAGENT_STARTED", "subagentRunId": null, "name": "x"}),
            ),
            17 => (
                "malformed/tag_null",
                json!({"type": "TEXT_MESSAGE_CONTENT", "messageId": target, "delta": "x", "subagentRunId": null}),
            ),
            18 => (
                "malformed/run_error_without_message",
                json!({"type": "RUN_ERROR", "code": "x"}),
            ),
            19 => (
                "malformed/parent_run_id_null",
                json!({"type": "RUN_STARTED", "threadId": self.thread_id, "runId": mid, "parentRunId": null}),
            ),
            20 => (
                "malformed/snapshot_message_without_id",
                json!({"type": "MESSAGES_SNAPSHOT", "messages": [{"role": "user", "content": "hi"}]}),
            ),
            21 => (
                "malformed/snapshot_user_content_number",
                json!({"type": "MESSAGES_SNAPSHOT", "messages": [{"id": mid, "role": "user", "content": 5}]}),
            ),
            22 => (
                "malformed/usage_negative",
                json!({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id, "usage": [{"inputTokens": -1}]}),
            ),
            23 => (
                "malformed/step_name_number",
                json!({"type": "STEP_STARTED", "stepName": 3}),
            ),
            24 => (
                "malformed/chunk_delta_null",
                json!({"type": "TEXT_MESSAGE_CHUNK", "messageId": mid, "delta": null}),
            ),
            25 => (
                "malformed/part_without_mime_type",
                json!({"type": "TOOL_CALL_RESULT", "messageId": mid, "toolCallId": "c",
                "content": [{"type": "image", "source": {"type": "data", "value": "aGVsbG8="}}]}),
            ),
            26 => (
                "malformed/state_snapshot_without_snapshot",
                json!({"type": "STATE_SNAPSHOT"}),
            ),
            27 => (
                "malformed/custom_without_value",
                json!({"type": "CUSTOM", "name": "x"}),
            ),
            28 => (
                "malformed/raw_without_event",
                json!({"type": "RAW", "source": "x"}),
            ),
            29 => (
                "malformed/reasoning_start_without_role",
                json!({"type": "REASONING_MESSAGE_START", "messageId": mid}),
            ),
            30 => (
                "malformed/input_without_messages",
                json!({"type": "RUN_STARTED", "threadId": self.thread_id, "runId": mid, "input": {"threadId": self.thread_id, "runId": mid}}),
            ),
            31 => (
                "malformed/activity_patch_replace_without_value",
                json!({"type": "ACTIVITY_DELTA", "messageId": mid, "activityType": "PLAN", "patch": [{"op": "replace", "path": "/a"}]}),
            ),
            32 => (
                "malformed/encrypted_without_value",
                json!({"type": "REASONING_ENCRYPTED_VALUE", "subtype": "message", "entityId": mid}),
            ),
            33 => (
                "malformed/suspended_interrupt_id_number",
                json!({"type": "SUBAGENT_FINISHED", "subagentRunId": mid, "outcome": {"type": "suspended", "interruptIds": [1]}}),
            ),
            34 => (
                "malformed/subagent_outcome_null",
                json!({"type": "SUBAGENT_FINISHED", "subagentRunId": mid, "outcome": null}),
            ),
            _ => (
                "malformed/snapshot_message_metadata_null",
                json!({"type": "MESSAGES_SNAPSHOT", "messages": [{"id": mid, "role": "user", "content": "x", "metadata": null}]}),
            ),
        }
    }
}
