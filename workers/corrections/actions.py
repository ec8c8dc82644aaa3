"""How a teacher sees a trajectory and how its reply becomes a step.

The prefix goes to the teacher as OpenAI-style chat messages (assistant tool calls with JSON
argument strings, tool results with their call ids). The teacher answers with one JSON
action, `{"content": "...", "tool_calls": [{"name": ..., "arguments": {...}}]}`, constrained
by a schema built from the trajectory's own tool schemas: every backend can enforce that
(response_format, vLLM guided decoding, xgrammar), so even a weak model writes a well-formed
step, and the pipeline gives each call a fresh id that the tool results then answer."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

CONTENT_MAX = 4000
MAX_CALLS = 4
ACTION_NOTE = (
    'Write the next assistant turn as one JSON object: {"content": text for the user (may '
    'be empty when calling tools), "tool_calls": [{"name": tool name, "arguments": '
    "{...}}] (empty for a plain reply)}. The available tools are:\n"
)


def _call_message(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments", {})
    return {
        "id": call.get("id") or "",
        "type": "function",
        "function": {
            "name": call.get("name", ""),
            "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
        },
    }


def chat_messages(steps: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Canonical steps as OpenAI chat messages (agent names kept in `name`)."""
    messages = []
    for step in steps:
        message: dict[str, Any] = {"role": step["role"], "content": step.get("content") or ""}
        if step.get("name") and step["role"] != "tool":
            message["name"] = step["name"]
        if step.get("tool_calls"):
            message["tool_calls"] = [_call_message(c) for c in step["tool_calls"]]
        if step["role"] == "tool":
            message["tool_call_id"] = step.get("tool_call_id") or ""
        messages.append(message)
    return messages


def tool_names(tools: Sequence[dict[str, Any]]) -> list[str]:
    names = []
    for tool in tools:
        function = tool.get("function", tool)
        if isinstance(function, dict) and function.get("name"):
            names.append(str(function["name"]))
    return sorted(set(names))


def action_schema(tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The JSON a teacher answers with; tool names limited to the trajectory's tools."""
    names = tool_names(tools)
    call = {
        "type": "object",
        "properties": {
            "name": {"enum": names} if names else {"type": "string", "maxLength": 100},
            "arguments": {"type": "object"},
        },
        "required": ["name", "arguments"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            "content": {"type": "string", "maxLength": CONTENT_MAX},
            "tool_calls": {"type": "array", "items": call, "maxItems": MAX_CALLS if names else 0},
        },
        "required": ["content", "tool_calls"],
        "additionalProperties": False,
    }


def instruction(tools: Sequence[dict[str, Any]], extra: str = "", guidance: str = "") -> str:
    text = ACTION_NOTE + json.dumps(list(tools), ensure_ascii=False)
    if extra.strip():
        text = extra.strip() + "\n\n" + text
    if guidance.strip():
        text += "\n\nGuidance from a reviewer of an earlier attempt (follow it):\n" + guidance
    return text


def to_step(action: dict[str, Any], call_id_prefix: str, name: str = "") -> dict[str, Any]:
    """The assistant step of a validated action; its calls get ids `{prefix}-{n}`."""
    step: dict[str, Any] = {"role": "assistant", "content": action["content"]}
    if name:
        step["name"] = name
    calls = [
        {"id": f"{call_id_prefix}-{n}", "name": c["name"], "arguments": c["arguments"]}
        for n, c in enumerate(action["tool_calls"], start=1)
    ]
    if calls:
        step["tool_calls"] = calls
    return step
