"""A LangGraph graph served by the official adapter, `ag-ui-langgraph`, with
no LLM: its one node answers with a fixed message, streamed by a fixed chat model
(the test double of an LLM), and — when the client offers the `confirm_action` tool and
has not answered it yet — a call of that tool (a frontend tool call); asked
for approval, it interrupts (LangGraph's `interrupt()`, ended with the 1.1
interrupt outcome) and a later run resumes it.

`agwire check` judges it (crates/agwire-check/tests/peers.rs).

Usage: python server.py --port 0   (prints "listening <port>" once listening)
"""

import argparse
import json
import socket
import sys
import uuid

import uvicorn
from ag_ui_langgraph import LangGraphAgent, add_langgraph_fastapi_endpoint
from fastapi import FastAPI
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt


class State(MessagesState):
    tools: list


class FixedModel(BaseChatModel):
    """A chat model that answers one fixed message, streamed word by word and
    then its tool calls as tool-call chunks, as a provider streams them (the
    test double of an LLM: nothing here is the adapter's)."""

    reply: AIMessage

    @property
    def _llm_type(self) -> str:
        return "fixed"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        return ChatResult(generations=[ChatGeneration(message=self.reply)])

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):
        words = self.reply.content.split(" ")
        for i, word in enumerate(words):
            text = word if i == len(words) - 1 else word + " "
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=text, id=self.reply.id))
            if run_manager:
                run_manager.on_llm_new_token(text, chunk=chunk)
            yield chunk
        for i, call in enumerate(self.reply.tool_calls):
            chunk = ChatGenerationChunk(
                message=AIMessageChunk(
                    content="",
                    id=self.reply.id,
                    tool_call_chunks=[
                        {"name": call["name"], "args": json.dumps(call["args"]), "id": call["id"], "index": i}
                    ],
                )
            )
            if run_manager:
                run_manager.on_llm_new_token("", chunk=chunk)
            yield chunk


async def chat(state: State, config):
    offered = any(
        (t.get("name") if isinstance(t, dict) else getattr(t, "name", None)) == "confirm_action"
        for t in state.get("tools") or []
    )
    answered = bool(state["messages"]) and isinstance(state["messages"][-1], ToolMessage)
    last = state["messages"][-1].content if state["messages"] else ""
    if isinstance(last, str) and "approval" in last:
        # LangGraph's own human-in-the-loop: the run ends interrupted and a
        # later run resumes it (the answer is what interrupt() returns).
        decision = interrupt({"question": "Send it?"})
        return {"messages": [AIMessage(id=f"msg-{uuid.uuid4()}", content=f"Resumed with {decision!r}.")]}
    if offered and not answered:
        reply = AIMessage(
            content="Let me confirm that with you.",
            tool_calls=[{"name": "confirm_action", "args": {"action": "archive"}, "id": f"call-{uuid.uuid4()}"}],
        )
    elif answered:
        reply = AIMessage(content="Confirmed, thank you.")
    else:
        reply = AIMessage(content="Hello from a LangGraph graph with no LLM.")
    reply.id = f"msg-{uuid.uuid4()}"
    message = await FixedModel(reply=reply).ainvoke(state["messages"], config)
    return {"messages": [message]}


builder = StateGraph(State)
builder.add_node("chat", chat)
builder.add_edge(START, "chat")
builder.add_edge("chat", END)
graph = builder.compile(checkpointer=MemorySaver())

app = FastAPI()
add_langgraph_fastapi_endpoint(app, LangGraphAgent(name="fixed", graph=graph, emit_interrupt_outcome=True), "/agent")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(4096)
    print(f"listening {sock.getsockname()[1]}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", backlog=4096)).run(sockets=[sock])


if __name__ == "__main__":
    sys.exit(main())
