"""ShareGPT: `{"conversations": [{"from": ..., "value": ...}], "system": ..., "tools": ...}`.

Speakers follow the common conventions (human/user, gpt/assistant, system, and LLaMA-Factory's
`function_call` / `observation` for tool use). A top-level `system` prompt becomes step 0.
"""

from __future__ import annotations

import json
from typing import Any

from curation.canonical import Record, RecordError

NAME = "sharegpt"
SPEAKERS = {
    "human": "user",
    "user": "user",
    "gpt": "assistant",
    "assistant": "assistant",
    "chatgpt": "assistant",
    "bing": "assistant",
    "model": "assistant",
    "system": "system",
    "function_call": "assistant",
    "observation": "tool",
    "tool": "tool",
    "function": "tool",
}
# The speaker each role is written as on export; any other speaker is kept in step metadata.
DEFAULT_SPEAKERS = {"user": "human", "assistant": "gpt", "system": "system", "tool": "observation"}


def detect(obj: dict) -> bool:
    return "conversations" in obj


def _turn_to_step(turn: Any, where: str) -> dict:
    if not isinstance(turn, dict):
        raise RecordError(f"expected an object, got {type(turn).__name__}", where)
    speaker = turn.get("from")
    if speaker not in SPEAKERS:
        known = ", ".join(SPEAKERS)
        raise RecordError(f"unknown speaker {speaker!r}; expected one of {known}", f"{where}.from")
    value = turn.get("value")
    step: dict[str, Any] = {"role": SPEAKERS[speaker], "content": value}
    if speaker != DEFAULT_SPEAKERS[step["role"]]:
        step["metadata"] = {"from": speaker}
    if speaker == "function_call":
        try:
            call = json.loads(value) if isinstance(value, str) else value
        except ValueError as exc:
            raise RecordError(f"function_call value is not JSON: {exc}", f"{where}.value") from exc
        calls = call if isinstance(call, list) else [call]
        step["content"] = ""
        step["tool_calls"] = [
            {"id": "", "name": c.get("name"), "arguments": c.get("arguments", {})}
            if isinstance(c, dict)
            else c
            for c in calls
        ]
    return step


def parse(obj: dict, source: str = "") -> dict:
    turns = obj["conversations"]
    if not isinstance(turns, list):
        raise RecordError(f"expected a list, got {type(turns).__name__}", "conversations")
    steps = [_turn_to_step(t, f"conversations[{i}]") for i, t in enumerate(turns)]
    if obj.get("system"):
        steps.insert(0, {"role": "system", "content": obj["system"], "metadata": {"from": "top"}})
    tools = obj.get("tools") or []
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except ValueError as exc:
            raise RecordError(f"not valid JSON: {exc}", "tools") from exc
    record = {
        k: obj[k] for k in ("id", "task", "agent", "outcome", "labels", "metadata") if k in obj
    }
    record.update(steps=steps, tools=tools)
    return record


def _step_to_turn(step: Any) -> dict:
    speaker = step.metadata.get("from") or DEFAULT_SPEAKERS[step.role]
    if speaker == "function_call" or step.tool_calls:
        calls = [{"name": c.name, "arguments": c.arguments} for c in step.tool_calls]
        return {
            "from": "function_call",
            "value": json.dumps(calls[0] if len(calls) == 1 else calls),
        }
    return {"from": speaker, "value": step.content}


def dump(record: Record) -> dict:
    canonical = record.to_dict()
    steps = list(record.steps)
    out: dict[str, Any] = {"id": record.id}
    if steps and steps[0].metadata.get("from") == "top":
        out["system"] = steps.pop(0).content
    out["conversations"] = [_step_to_turn(s) for s in steps]
    out["tools"] = record.tools
    for key in ("task", "agent", "outcome", "labels", "metadata"):
        if key in canonical:
            out[key] = canonical[key]
    return out
