//! The ways to break a stream: faults the 1.0.0 client rejects, and 1.1
//! rules it does not check.

/// One way to break a stream that the 1.0.0 client rejects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fault {
    FirstNotRunStarted,
    NestedRunStarted,
    AfterRunFinished,
    AfterRunError,
    FinishOpenSteps,
    FinishOpenText,
    FinishOpenReasoningMessage,
    FinishOpenReasoningSpan,
    FinishOpenTool,
    FinishOpenSubagent,
    DupTextStart,
    DupToolStart,
    DupReasoningSpan,
    DupReasoningMessage,
    TextContentNoStart,
    TextEndNoStart,
    ToolArgsNoStart,
    ToolEndNoStart,
    ReasoningContentNoStart,
    ReasoningMessageEndNoStart,
    ReasoningEndNoSpan,
    StepNotStarted,
    StepOtherOwner,
    StepDuplicate,
    SubagentTerminalUnknown,
    SubagentDuplicate,
    SubagentReused,
    SubagentParentUnknown,
    TagMismatchMessage,
    TagMismatchToolCall,
    TagMismatchReasoning,
    TagMismatchActivity,
    ToolParentOwnerMismatch,
    ToolReopenParentOwner,
    ChunkTextNoId,
    ChunkToolNoId,
    ChunkToolNoName,
    ChunkReasoningNoId,
    ChunkConflictRole,
    ChunkConflictName,
    ChunkConflictToolName,
    ChunkConflictParent,
    ChunkLaneOwner,
    ChunkAmbiguous,
}

impl Fault {
    pub(super) const ALL: [Fault; 44] = [
        Fault::FirstNotRunStarted,
        Fault::NestedRunStarted,
        Fault::AfterRunFinished,
        Fault::AfterRunError,
        Fault::FinishOpenSteps,
        Fault::FinishOpenText,
        Fault::FinishOpenReasoningMessage,
        Fault::FinishOpenReasoningSpan,
        Fault::FinishOpenTool,
        Fault::FinishOpenSubagent,
        Fault::DupTextStart,
        Fault::DupToolStart,
        Fault::DupReasoningSpan,
        Fault::DupReasoningMessage,
        Fault::TextContentNoStart,
        Fault::TextEndNoStart,
        Fault::ToolArgsNoStart,
        Fault::ToolEndNoStart,
        Fault::ReasoningContentNoStart,
        Fault::ReasoningMessageEndNoStart,
        Fault::ReasoningEndNoSpan,
        Fault::StepNotStarted,
        Fault::StepOtherOwner,
        Fault::StepDuplicate,
        Fault::SubagentTerminalUnknown,
        Fault::SubagentDuplicate,
        Fault::SubagentReused,
        Fault::SubagentParentUnknown,
        Fault::TagMismatchMessage,
        Fault::TagMismatchToolCall,
        Fault::TagMismatchReasoning,
        Fault::TagMismatchActivity,
        Fault::ToolParentOwnerMismatch,
        Fault::ToolReopenParentOwner,
        Fault::ChunkTextNoId,
        Fault::ChunkToolNoId,
        Fault::ChunkToolNoName,
        Fault::ChunkReasoningNoId,
        Fault::ChunkConflictRole,
        Fault::ChunkConflictName,
        Fault::ChunkConflictToolName,
        Fault::ChunkConflictParent,
        Fault::ChunkLaneOwner,
        Fault::ChunkAmbiguous,
    ];

    /// The [`TS_TEMPLATES`](super::TS_TEMPLATES) key the client's error must match.
    pub(super) fn template(self) -> &'static str {
        match self {
            Fault::FirstNotRunStarted => "verify.first_event",
            Fault::NestedRunStarted => "verify.run_active",
            Fault::AfterRunFinished => "verify.run_finished",
            Fault::AfterRunError => "verify.run_errored",
            Fault::FinishOpenSteps => "verify.finish_open_steps",
            Fault::FinishOpenText => "verify.finish_open_text",
            Fault::FinishOpenReasoningMessage => "verify.finish_open_reasoning_messages",
            Fault::FinishOpenReasoningSpan => "verify.finish_open_reasoning_spans",
            Fault::FinishOpenTool => "verify.finish_open_tool_calls",
            Fault::FinishOpenSubagent => "verify.finish_open_subagents",
            Fault::DupTextStart => "verify.text_duplicate",
            Fault::DupToolStart => "verify.tool_duplicate",
            Fault::DupReasoningSpan => "verify.span_duplicate",
            Fault::DupReasoningMessage => "verify.reasoning_duplicate",
            Fault::TextContentNoStart => "verify.text_content_unstarted",
            Fault::TextEndNoStart => "verify.text_end_unstarted",
            Fault::ToolArgsNoStart => "verify.tool_args_unstarted",
            Fault::ToolEndNoStart => "verify.tool_end_unstarted",
            Fault::ReasoningContentNoStart => "verify.reasoning_content_unstarted",
            Fault::ReasoningMessageEndNoStart => "verify.reasoning_end_unstarted",
            Fault::ReasoningEndNoSpan => "verify.span_end_unstarted",
            Fault::StepNotStarted => "verify.step_unstarted",
            Fault::StepOtherOwner => "verify.step_other_owner",
            Fault::StepDuplicate => "verify.step_duplicate",
            Fault::SubagentTerminalUnknown => "verify.subagent_terminal_unknown",
            Fault::SubagentDuplicate => "verify.subagent_duplicate",
            Fault::SubagentReused => "verify.subagent_reused",
            Fault::SubagentParentUnknown => "verify.subagent_parent_unknown",
            Fault::TagMismatchMessage => "verify.tag_message",
            Fault::TagMismatchToolCall => "verify.tag_tool_call",
            Fault::TagMismatchReasoning => "verify.tag_reasoning",
            Fault::TagMismatchActivity => "verify.tag_activity",
            Fault::ToolParentOwnerMismatch => "verify.tool_parent_tag",
            Fault::ToolReopenParentOwner => "verify.tool_reopen_parent_owner",
            Fault::ChunkTextNoId => "chunk.text_without_id",
            Fault::ChunkToolNoId => "chunk.tool_without_id",
            Fault::ChunkToolNoName => "chunk.tool_without_name",
            Fault::ChunkReasoningNoId => "chunk.reasoning_without_id",
            Fault::ChunkConflictRole => "chunk.conflict_role",
            Fault::ChunkConflictName => "chunk.conflict_name",
            Fault::ChunkConflictToolName => "chunk.conflict_tool_name",
            Fault::ChunkConflictParent => "chunk.conflict_parent",
            Fault::ChunkLaneOwner => "chunk.lane_owner",
            Fault::ChunkAmbiguous => "chunk.ambiguous",
        }
    }
}

/// A 1.1 rule the 1.0.0 client does not enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SpecFault {
    RunStartedThread,
    RunFinishedRunId,
    RunFinishedThread,
    DuplicateInterruptIds,
}

impl SpecFault {
    pub(super) const ALL: [SpecFault; 4] = [
        SpecFault::RunStartedThread,
        SpecFault::RunFinishedRunId,
        SpecFault::RunFinishedThread,
        SpecFault::DuplicateInterruptIds,
    ];

    pub(super) fn key(self) -> &'static str {
        match self {
            SpecFault::RunStartedThread => "spec.run_started_thread",
            SpecFault::RunFinishedRunId => "spec.run_finished_run_id",
            SpecFault::RunFinishedThread => "spec.run_finished_thread",
            SpecFault::DuplicateInterruptIds => "spec.duplicate_interrupt_ids",
        }
    }

    /// A fragment of the message later clients (and the .NET SDK) fail with.
    pub(super) fn fragment(self) -> &'static str {
        match self {
            SpecFault::RunStartedThread => "this stream belongs to thread",
            SpecFault::RunFinishedRunId => "must agree on their runId",
            SpecFault::RunFinishedThread => "boundary events carry the input's threadId",
            SpecFault::DuplicateInterruptIds => "An interrupt id is unique within the run",
        }
    }
}
