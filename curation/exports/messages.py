"""Steps as chat messages in OpenAI format, and as plain text for the stepwise kind.

Only named step fields are exported: role, name, content, tool calls and the tool call id.
Step and trajectory metadata never are (it may hold anything, correction guidance included).
Every message has the same keys, None where a field is empty, so JSONL and Parquet files load
into the same `datasets` features.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import orjson

# TRL adds a generation prompt after a user or tool message and continues an assistant one;
# a prompt that ends anywhere else cannot be rendered.
PROMPT_END_ROLES = ("user", "tool", "assistant")
STEP_FIELDS = ("index", "role", "name", "content", "tool_calls", "tool_call_id")


class StepRow(NamedTuple):
    index: int
    role: str
    name: str
    content: str
    tool_calls: list
    tool_call_id: str


def dumps(value: Any) -> str:
    """JSON text with sorted keys, the same bytes whatever the database kept the keys in."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def _call(call: dict) -> dict:
    arguments = call.get("arguments")
    return {
        "id": call.get("id") or None,
        "type": "function",
        "function": {
            "name": call.get("name", ""),
            "arguments": arguments if isinstance(arguments, str) else dumps(arguments),
        },
    }


def message(step: StepRow, weight: int | None = None) -> dict:
    out: dict[str, Any] = {
        "role": step.role,
        "content": step.content,
        "name": step.name or None,
        "tool_calls": [_call(c) for c in step.tool_calls] or None,
        "tool_call_id": step.tool_call_id or None,
    }
    if weight is not None:
        out["weight"] = weight
    return out


def messages(steps: Sequence[StepRow]) -> list[dict]:
    return [message(s) for s in steps]


def as_text(step: StepRow) -> str:
    """One step as text: `role (name): content`, tool calls as `<tool_call>{json}</tool_call>`."""
    head = f"{step.role} ({step.name})" if step.name else step.role
    parts = [step.content] if step.content else []
    parts += [
        "<tool_call>"
        + dumps({"arguments": c.get("arguments"), "name": c.get("name", "")})
        + "</tool_call>"
        for c in step.tool_calls
    ]
    return f"{head}: " + "\n".join(parts)


def first_assistant(steps: Sequence[StepRow]) -> int | None:
    return next((i for i, s in enumerate(steps) if s.role == "assistant"), None)


def prompt_problem(prompt: Sequence[StepRow]) -> str | None:
    """Why these steps cannot be a conversational prompt, or None when they can."""
    if not prompt:
        return "nothing comes before the step"
    if prompt[-1].role not in PROMPT_END_ROLES:
        return f"the prompt would end with a {prompt[-1].role} message"
    return None
