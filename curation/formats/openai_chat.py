"""OpenAI chat records: `{"messages": [...], "tools": [...]}` with `tool_calls` and `tool` turns.

Extra top-level keys of the canonical record (`id`, `task`, `agent`, `outcome`, `labels`,
`metadata`) are read when present; `model` is accepted as the agent model.
"""

from __future__ import annotations

import json
from typing import Any

from curation.canonical import Record, RecordError

NAME = "openai"
ROLE_ALIASES = {"developer": "system", "function": "tool"}


def detect(obj: dict) -> bool:
    return "messages" in obj


def message_to_step(message: Any) -> Any:
    """One OpenAI chat message as a canonical step dict (validation happens later)."""
    if not isinstance(message, dict):
        return message
    role = message.get("role")
    step: dict[str, Any] = {
        "role": ROLE_ALIASES.get(role, role),
        "content": message.get("content"),
    }
    if role in ROLE_ALIASES:
        step["metadata"] = {"original_role": role}
    for key in ("name", "tool_call_id", "tool_calls"):
        if message.get(key) is not None:
            step[key] = message[key]
    reasoning = message.get("reasoning_content", message.get("reasoning"))
    if reasoning is not None:
        step["reasoning"] = reasoning
    return step


def step_to_message(step: Any) -> dict:
    metadata = step.metadata or {}
    message: dict[str, Any] = {"role": metadata.get("original_role", step.role)}
    message["content"] = step.content if (step.content or not step.tool_calls) else None
    if step.name:
        message["name"] = step.name
    if step.reasoning:
        message["reasoning_content"] = step.reasoning
    if step.tool_calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(call.arguments, ensure_ascii=False),
                },
            }
            for call in step.tool_calls
        ]
    if step.tool_call_id:
        message["tool_call_id"] = step.tool_call_id
    return message


def parse(obj: dict, source: str = "") -> dict:
    messages = obj["messages"]
    if not isinstance(messages, list):
        raise RecordError(f"expected a list, got {type(messages).__name__}", "messages")
    record = {
        k: obj[k] for k in ("id", "task", "tools", "outcome", "labels", "metadata") if k in obj
    }
    agent = obj.get("agent") or {}
    if isinstance(agent, dict):  # anything else is reported by validation
        agent = dict(agent)
        if "model" in obj and "model" not in agent:
            agent["model"] = obj["model"]
    record["agent"] = agent
    record["steps"] = [message_to_step(m) for m in messages]
    return record


def dump(record: Record) -> dict:
    canonical = record.to_dict()
    out = {"id": record.id, "model": record.agent_model}
    out["messages"] = [step_to_message(s) for s in record.steps]
    for key in ("task", "tools", "outcome", "labels", "metadata"):
        if key in canonical:
            out[key] = canonical[key]
    out["agent"] = {"role": record.agent_role}
    return out
