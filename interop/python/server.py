"""The Python reference producer: a FastAPI server written the way AG-UI's own
documents show (seed 003), with the official `ag-ui-protocol` EventEncoder.

agwire's tests run agwire-client and the official @ag-ui/client against it and
compare what they fold; bench/http.sh measures it beside agwire-server. Content
is deterministic (ids derived from the run id) so two clients folding the same
route get identical results.

Usage: python server.py --port 0   (prints "listening <port>" once bound)
"""

import argparse
import asyncio
import socket
import sys

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from ag_ui.core import (
    EventType,
    RunAgentInput,
    RunFinishedEvent,
    RunStartedEvent,
    StateDeltaEvent,
    StateSnapshotEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageChunkEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallChunkEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder

app = FastAPI()

WORDS = ["The ", "quick ", "agent ", "streams ", "tokens ", "to ", "the ", "user ", "café ", "done. "]


def started(i: RunAgentInput):
    return RunStartedEvent(type=EventType.RUN_STARTED, threadId=i.thread_id, runId=i.run_id)


def finished(i: RunAgentInput):
    return RunFinishedEvent(type=EventType.RUN_FINISHED, threadId=i.thread_id, runId=i.run_id)


def text(message_id: str, deltas):
    yield TextMessageStartEvent(type=EventType.TEXT_MESSAGE_START, messageId=message_id, role="assistant")
    for d in deltas:
        yield TextMessageContentEvent(type=EventType.TEXT_MESSAGE_CONTENT, messageId=message_id, delta=d)
    yield TextMessageEndEvent(type=EventType.TEXT_MESSAGE_END, messageId=message_id)


def last_user_text(i: RunAgentInput) -> str:
    for m in reversed(i.messages):
        if m.role == "user":
            return m.content if isinstance(m.content, str) else ""
    return ""


def stream(request: Request, events):
    encoder = EventEncoder(accept=request.headers.get("accept"))

    async def body():
        for event in events:
            yield encoder.encode(event)

    return StreamingResponse(body(), media_type=encoder.get_content_type())


@app.post("/agentic_chat")
async def agentic_chat(input_data: RunAgentInput, request: Request):
    reply = f"Hello! You said: {last_user_text(input_data)}"
    deltas = [reply[k : k + 6] for k in range(0, len(reply), 6)]
    events = [started(input_data), *text(f"{input_data.run_id}-msg-1", deltas), finished(input_data)]
    return stream(request, events)


@app.post("/chunks")
async def chunks(input_data: RunAgentInput, request: Request):
    rid = input_data.run_id
    events = [
        started(input_data),
        TextMessageChunkEvent(type=EventType.TEXT_MESSAGE_CHUNK, messageId=f"{rid}-msg-1", role="assistant", delta="Let me "),
        TextMessageChunkEvent(type=EventType.TEXT_MESSAGE_CHUNK, messageId=f"{rid}-msg-1", delta="check."),
        ToolCallChunkEvent(
            type=EventType.TOOL_CALL_CHUNK,
            toolCallId=f"{rid}-call-1",
            toolCallName="lookup",
            parentMessageId=f"{rid}-msg-1",
            delta='{"query":',
        ),
        ToolCallChunkEvent(type=EventType.TOOL_CALL_CHUNK, toolCallId=f"{rid}-call-1", delta='"weather"}'),
        finished(input_data),
    ]
    return stream(request, events)


@app.post("/tool_call")
async def tool_call(input_data: RunAgentInput, request: Request):
    rid = input_data.run_id
    args = '{"background":"red"}'
    events = [
        started(input_data),
        ToolCallStartEvent(type=EventType.TOOL_CALL_START, toolCallId=f"{rid}-call-1", toolCallName="change_background"),
        *[
            ToolCallArgsEvent(type=EventType.TOOL_CALL_ARGS, toolCallId=f"{rid}-call-1", delta=args[k : k + 5])
            for k in range(0, len(args), 5)
        ],
        ToolCallEndEvent(type=EventType.TOOL_CALL_END, toolCallId=f"{rid}-call-1"),
        finished(input_data),
    ]
    return stream(request, events)


@app.post("/shared_state")
async def shared_state(input_data: RunAgentInput, request: Request):
    state = input_data.state if isinstance(input_data.state, dict) else {}
    snapshot = {**state, "count": 1, "items": ["a"]}
    events = [
        started(input_data),
        StateSnapshotEvent(type=EventType.STATE_SNAPSHOT, snapshot=snapshot),
        StateDeltaEvent(
            type=EventType.STATE_DELTA,
            delta=[{"op": "replace", "path": "/count", "value": 2}, {"op": "add", "path": "/items/-", "value": "b"}],
        ),
        finished(input_data),
    ]
    return stream(request, events)


@app.post("/steps")
async def steps(input_data: RunAgentInput, request: Request):
    events = [
        started(input_data),
        StepStartedEvent(type=EventType.STEP_STARTED, stepName="plan"),
        *text(f"{input_data.run_id}-msg-1", ["Planning ", "done."]),
        StepFinishedEvent(type=EventType.STEP_FINISHED, stepName="plan"),
        finished(input_data),
    ]
    return stream(request, events)


@app.post("/short")
async def short(input_data: RunAgentInput, request: Request):
    events = [started(input_data), *text(f"{input_data.run_id}-msg-1", ["Hello from Python."]), finished(input_data)]
    return stream(request, events)


@app.post("/long")
async def long(input_data: RunAgentInput, request: Request, n: int = 100_000):
    encoder = EventEncoder(accept=request.headers.get("accept"))
    message_id = f"{input_data.run_id}-msg-1"

    async def body():
        yield encoder.encode(started(input_data))
        yield encoder.encode(
            TextMessageStartEvent(type=EventType.TEXT_MESSAGE_START, messageId=message_id, role="assistant")
        )
        for k in range(n):
            yield encoder.encode(
                TextMessageContentEvent(type=EventType.TEXT_MESSAGE_CONTENT, messageId=message_id, delta=WORDS[k % 10])
            )
        yield encoder.encode(TextMessageEndEvent(type=EventType.TEXT_MESSAGE_END, messageId=message_id))
        yield encoder.encode(finished(input_data))

    return StreamingResponse(body(), media_type=encoder.get_content_type())


@app.post("/idle")
async def idle(input_data: RunAgentInput, request: Request):
    encoder = EventEncoder(accept=request.headers.get("accept"))

    async def body():
        yield encoder.encode(started(input_data))
        while not await request.is_disconnected():
            await asyncio.sleep(15)

    return StreamingResponse(body(), media_type=encoder.get_content_type())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    # Listening before "listening" is printed: a client that connects at
    # once is queued instead of refused while uvicorn starts.
    sock.listen(4096)
    print(f"listening {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app, log_level="warning", backlog=4096)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
