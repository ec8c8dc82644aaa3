"""Who&When failure logs (Agents_Failure_Attribution): one failed multi-agent run per file.

`history` is a list of messages. In the algorithm-generated logs each message names its agent in
`name` (`role` is user/assistant); in the hand-crafted logs the agent is written in `role` and
`name` is absent. `mistake_step` indexes `history` directly, so steps are kept one for one and
the gold label points at the same step. `mistake_agent` and `mistake_reason` are kept as given,
even where the data disagrees with itself.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from curation.canonical import Record, RecordError

NAME = "who_and_when"
GOLD_SOURCE = "who-and-when"
USER_ROLES = {"human", "user"}
TASK_KEYS = ("question", "question_ID", "level", "ground_truth")


def detect(obj: dict) -> bool:
    return "history" in obj and any(k in obj for k in ("mistake_step", "mistake_agent", "question"))


def _message_to_step(message: Any, where: str) -> dict:
    if not isinstance(message, dict):
        raise RecordError(f"expected an object, got {type(message).__name__}", where)
    role = message.get("role")
    if not isinstance(role, str) or not role:
        raise RecordError("is missing", f"{where}.role")
    if "name" in message:  # algorithm-generated: the agent is in `name`
        mapped = role if role in ("system", "user", "assistant", "tool") else "assistant"
        step = {"role": mapped, "name": message["name"], "content": message.get("content")}
        if mapped != role:
            step["metadata"] = {"original_role": role}
        return step
    # hand-crafted: the agent is written in `role`, with what it did in brackets
    # ("Orchestrator (thought)"); the name is the agent, as `mistake_agent` names it.
    mapped = "user" if role in USER_ROLES else "assistant"
    return {
        "role": mapped,
        "name": "" if role in USER_ROLES else role.split(" (", 1)[0],
        "content": message.get("content"),
        "metadata": {"role_as_written": role},
    }


def parse(obj: dict, source: str = "") -> dict:
    history = obj["history"]
    if not isinstance(history, list):
        raise RecordError(f"expected a list, got {type(history).__name__}", "history")
    question = obj.get("question") or ""
    task_id = obj.get("question_ID") or (
        "q-" + hashlib.sha256(str(question).encode()).hexdigest()[:12]
    )
    success = obj.get("is_correct", obj.get("is_corrected", False))
    record: dict[str, Any] = {
        "id": Path(source).stem if source else str(task_id),
        "task": {
            "id": task_id,
            "instruction": question,
            "reference": {"ground_truth": obj.get("ground_truth")},
            "metadata": {"level": obj["level"]} if "level" in obj else {},
        },
        "steps": [_message_to_step(m, f"history[{i}]") for i, m in enumerate(history)],
        "outcome": {"success": success if isinstance(success, bool) else None},
        "metadata": {
            "system_prompts": obj.get("system_prompt") or {},
            "extra": {k: v for k, v in obj.items() if k not in _KNOWN_KEYS},
        },
    }
    if any(obj.get(k) not in (None, "") for k in ("mistake_step", "mistake_agent")):
        record["labels"] = {
            "verdict": "failure",
            "first_critical_step": obj.get("mistake_step"),
            "agent": obj.get("mistake_agent"),
            "rationale": obj.get("mistake_reason"),
            "annotator": GOLD_SOURCE,
        }
    return record


_KNOWN_KEYS = {
    *TASK_KEYS,
    "history",
    "is_correct",
    "is_corrected",
    "mistake_agent",
    "mistake_step",
    "mistake_reason",
    "system_prompt",
}


def _step_to_message(step: Any) -> dict:
    if "role_as_written" in step.metadata:
        return {"content": step.content, "role": step.metadata["role_as_written"]}
    return {
        "content": step.content,
        "role": step.metadata.get("original_role", step.role),
        "name": step.name,
    }


def dump(record: Record) -> dict:
    out: dict[str, Any] = {
        "is_correct": record.success,
        "question": record.instruction,
        "question_ID": record.task_id,
        "ground_truth": (record.reference or {}).get("ground_truth"),
        "history": [_step_to_message(s) for s in record.steps],
        "system_prompt": record.metadata.get("system_prompts", {}),
        **record.metadata.get("extra", {}),
    }
    if "level" in record.task_metadata:
        out["level"] = record.task_metadata["level"]
    gold = next((la for la in record.labels if la.annotator == GOLD_SOURCE), None)
    if gold:
        out["mistake_agent"] = gold.agent
        step = gold.first_critical_step
        out["mistake_step"] = "" if step is None else str(step)
        out["mistake_reason"] = gold.rationale
    return out
