"""The canonical trajectory record (DESIGN.md section 4) and its validation.

Every importer turns its input into a plain dict in the canonical shape; `validate` checks it
field by field and returns a `Record`. Errors name the field (`steps[3].role`) so a user can
find the bad spot in their file.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field
from typing import Any

import orjson
from django.conf import settings

STEP_ROLES = ("system", "user", "assistant", "tool")
AGENT_ROLES = ("teacher", "student", "correction")
VERDICTS = ("success", "partial", "failure")


class RecordError(ValueError):
    """A record that cannot be imported; `field` says where in the record."""

    def __init__(self, reason: str, field: str = "") -> None:
        self.reason = reason
        self.field = field
        super().__init__(f"{field}: {reason}" if field else reason)

    def within(self, prefix: str) -> RecordError:
        """The same error, its field path under `prefix` (paths are built only on failure)."""
        field = f"{prefix}{'.' if self.field and self.field[0] != '[' else ''}{self.field}"
        return RecordError(self.reason, field)


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: Any  # a dict when the arguments were valid JSON, else the raw string


@dataclass
class Step:
    role: str
    content: str = ""
    name: str = ""
    reasoning: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str = ""
    metadata: dict = field(default_factory=dict)


@dataclass
class Labels:
    verdict: str = ""
    first_critical_step: int | None = None
    root_cause_step: int | None = None
    category: str = ""
    rationale: str = ""
    annotator: str = "gold"
    agent: str = ""
    confidence: float | None = None
    extra: dict = field(default_factory=dict)


@dataclass
class Record:
    id: str
    task_id: str
    instruction: str
    steps: list[Step]
    reference: Any = field(default_factory=dict)
    task_metadata: dict = field(default_factory=dict)
    agent_model: str = ""
    agent_role: str = "student"
    tools: list = field(default_factory=list)
    success: bool | None = None
    reward: float | None = None
    outcome_info: dict = field(default_factory=dict)
    labels: list[Labels] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The record in the canonical JSON shape."""
        out: dict[str, Any] = {
            "id": self.id,
            "task": {
                "id": self.task_id,
                "instruction": self.instruction,
                "reference": self.reference,
                "metadata": self.task_metadata,
            },
            "agent": {"model": self.agent_model, "role": self.agent_role},
            "tools": self.tools,
            "steps": [step_to_dict(s) for s in self.steps],
            "outcome": {"success": self.success, "reward": self.reward, "info": self.outcome_info},
            "metadata": self.metadata,
        }
        if self.labels:
            out["labels"] = [labels_to_dict(la) for la in self.labels]
        return out


def step_to_dict(step: Step) -> dict:
    out: dict[str, Any] = {"role": step.role, "content": step.content}
    if step.name:
        out["name"] = step.name
    if step.reasoning:
        out["reasoning"] = step.reasoning
    if step.tool_calls:
        out["tool_calls"] = [asdict(c) for c in step.tool_calls]
    if step.tool_call_id:
        out["tool_call_id"] = step.tool_call_id
    if step.metadata:
        out["metadata"] = step.metadata
    return out


def labels_to_dict(labels: Labels) -> dict:
    return {k: v for k, v in asdict(labels).items() if v not in ("", None, {})}


# --- validation -----------------------------------------------------------------------------


def _text(value: Any, where: str, *, required: bool = False) -> str:
    if type(value) is str:  # the hot path: most fields of most records
        if "\x00" in value or not (value.isascii() or _is_utf8(value)):
            _refuse_text(value, where)
        return value
    if value is None:
        if required:
            raise RecordError("is missing", where)
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise RecordError(f"expected a string, got {type(value).__name__}", where)
    return _text(str(value), where)


def _is_utf8(text: str) -> bool:
    """False for text holding an unpaired surrogate (such as "\ud83d"), which no database stores."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _refuse_text(text: str, where: str) -> None:
    if "\x00" in text:
        raise RecordError("contains a NUL character, which cannot be stored", where)
    bad = next(c for c in text if "\ud800" <= c <= "\udfff")
    raise RecordError(f"contains an unpaired surrogate {bad!r}, which cannot be stored", where)


def _object(value: Any, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RecordError(f"expected an object, got {type(value).__name__}", where)
    return value


# NUL written as a JSON escape: \u0000 after an even number of backslashes.
_ESCAPED_NUL = re.compile(rb"(?:^|[^\\])(?:\\\\)*\\u0000")


def encode_json(value: Any, where: str) -> str:
    """`value` as the JSON text the database stores, or a RecordError saying why it can't be.

    One C-level encoding replaces a walk over every nested value: PostgreSQL refuses NUL
    characters and unpaired surrogates anywhere in JSON, keys included.
    """
    if not value and type(value) in (dict, list):
        return "{}" if type(value) is dict else "[]"
    try:
        encoded = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError as exc:  # unpaired surrogates, integers beyond 64 bits, too deep
        raise RecordError(f"cannot be stored as JSON: {exc}", where) from None
    if b"\\u0000" in encoded and _ESCAPED_NUL.search(encoded):
        raise RecordError("contains a NUL character, which cannot be stored", where)
    return encoded.decode()


def _storable_object(value: Any, where: str) -> dict:
    value = _object(value, where)
    encode_json(value, where)
    return value


def _content(value: Any, where: str) -> str:
    """Message content: a string, or OpenAI-style content parts whose text is joined."""
    if isinstance(value, list):
        texts = []
        for i, part in enumerate(value):
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                raise RecordError("content parts must be strings or {type, text}", f"{where}[{i}]")
        value = "\n".join(texts)
    return _text(value, where)


def _tool_call(value: Any) -> ToolCall:
    if not isinstance(value, dict):
        raise RecordError(f"expected an object, got {type(value).__name__}")
    function = value.get("function") if isinstance(value.get("function"), dict) else value
    name = _text(function.get("name"), "name", required=True)
    arguments = function.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = orjson.loads(arguments) if arguments.strip() else {}
        except orjson.JSONDecodeError:
            pass  # keep what the model wrote: malformed arguments are part of the record
    return ToolCall(id=_text(value.get("id"), "id"), name=name, arguments=arguments)


def _step(value: Any) -> Step:
    """One step; errors name the field within the step (the caller adds `steps[i]`)."""
    if type(value) is not dict:
        raise RecordError(f"expected an object, got {type(value).__name__}")
    get = value.get
    role = get("role")
    if role not in STEP_ROLES:
        raise RecordError(f"expected one of {', '.join(STEP_ROLES)}, got {role!r}", "role")
    calls = get("tool_calls")
    tool_calls = []
    if calls:
        if type(calls) is not list:
            raise RecordError("expected a list", "tool_calls")
        for i, call in enumerate(calls):
            try:
                tool_calls.append(_tool_call(call))
            except RecordError as exc:
                raise exc.within(f"tool_calls[{i}]") from None
    return Step(
        role=role,
        content=_content(get("content"), "content"),
        name=_text(get("name"), "name"),
        reasoning=_text(get("reasoning"), "reasoning"),
        tool_calls=tool_calls,
        tool_call_id=_text(get("tool_call_id"), "tool_call_id"),
        metadata=_object(get("metadata"), "metadata"),
    )


def _steps(values: list) -> list[Step]:
    """The steps, within IMPORT_MAX_STEPS per trajectory and IMPORT_MAX_STEP_CHARS of text
    (content and reasoning) per step."""
    max_steps, max_chars = settings.IMPORT_MAX_STEPS, settings.IMPORT_MAX_STEP_CHARS
    if len(values) > max_steps:
        raise RecordError(
            f"{len(values)} steps are over the limit of {max_steps} per trajectory "
            "(IMPORT_MAX_STEPS)",
            "steps",
        )
    steps = []
    for i, value in enumerate(values):
        try:
            step = _step(value)
        except RecordError as exc:
            raise exc.within(f"steps[{i}]") from None
        chars = len(step.content) + len(step.reasoning)
        if chars > max_chars:
            raise RecordError(
                f"{chars} characters are over the limit of {max_chars} per step "
                "(IMPORT_MAX_STEP_CHARS)",
                f"steps[{i}]",
            )
        steps.append(step)
    return steps


def _step_number(value: Any, where: str, step_count: int) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RecordError(f"expected a step index, got {value!r}", where)
    if not 0 <= value < step_count:
        raise RecordError(f"step {value} is outside the trajectory (0..{step_count - 1})", where)
    return value


def _labels(value: Any, where: str, step_count: int) -> Labels:
    if not isinstance(value, dict):
        raise RecordError(f"expected an object, got {type(value).__name__}", where)
    verdict = _text(value.get("verdict"), f"{where}.verdict")
    if verdict and verdict not in VERDICTS:
        raise RecordError(
            f"expected one of {', '.join(VERDICTS)}, got {verdict!r}", f"{where}.verdict"
        )
    confidence = value.get("confidence")
    if confidence is not None and (
        isinstance(confidence, bool) or not isinstance(confidence, int | float)
    ):
        raise RecordError(f"expected a number, got {confidence!r}", f"{where}.confidence")
    return Labels(
        verdict=verdict,
        first_critical_step=_step_number(
            value.get("first_critical_step"), f"{where}.first_critical_step", step_count
        ),
        root_cause_step=_step_number(
            value.get("root_cause_step"), f"{where}.root_cause_step", step_count
        ),
        category=_text(value.get("category"), f"{where}.category"),
        rationale=_text(value.get("rationale"), f"{where}.rationale"),
        annotator=_text(value.get("annotator"), f"{where}.annotator") or "gold",
        agent=_text(value.get("agent"), f"{where}.agent"),
        confidence=confidence,
        extra=_storable_object(value.get("extra"), f"{where}.extra"),
    )


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RecordError(f"expected a number, got {value!r}", where)
    return float(value)


def validate(data: Any) -> Record:
    """Check a canonical dict and build a `Record`, or raise `RecordError` naming the field."""
    if not isinstance(data, dict):
        raise RecordError(f"a record must be a JSON object, got {type(data).__name__}")
    raw_steps = data.get("steps")
    if raw_steps is None:
        raise RecordError("is missing", "steps")
    if not isinstance(raw_steps, list):
        raise RecordError(f"expected a list, got {type(raw_steps).__name__}", "steps")
    if not raw_steps:
        raise RecordError("a trajectory needs at least one step", "steps")
    steps = _steps(raw_steps)

    task = data.get("task") or {}
    if isinstance(task, str):
        task = {"id": task}
    task = _object(task, "task")
    agent = _object(data.get("agent"), "agent")
    outcome = _object(data.get("outcome"), "outcome")
    agent_role = _text(agent.get("role"), "agent.role") or "student"
    if agent_role not in AGENT_ROLES:
        raise RecordError(
            f"expected one of {', '.join(AGENT_ROLES)}, got {agent_role!r}", "agent.role"
        )
    success = outcome.get("success")
    if success is not None and not isinstance(success, bool):
        raise RecordError(f"expected true, false or null, got {success!r}", "outcome.success")
    tools = data.get("tools") or []
    if not isinstance(tools, list):
        raise RecordError(f"expected a list, got {type(tools).__name__}", "tools")

    raw_labels = data.get("labels") or []
    if isinstance(raw_labels, dict):
        raw_labels = [raw_labels]
    if not isinstance(raw_labels, list):
        raise RecordError("expected an object or a list of objects", "labels")
    labels = [
        _labels(la, "labels" if len(raw_labels) == 1 else f"labels[{i}]", len(steps))
        for i, la in enumerate(raw_labels)
    ]

    record_id = _text(data.get("id"), "id")
    task_id = _text(task.get("id"), "task.id") or record_id or default_task_id(steps)
    reference = task.get("reference", {})
    return Record(
        id=record_id,
        task_id=task_id,
        instruction=_text(task.get("instruction"), "task.instruction") or first_user_text(steps),
        reference=reference if reference is not None else {},
        task_metadata=_object(task.get("metadata"), "task.metadata"),
        agent_model=_text(agent.get("model"), "agent.model"),
        agent_role=agent_role,
        tools=tools,
        steps=steps,
        success=success,
        reward=_number(outcome.get("reward"), "outcome.reward"),
        outcome_info=_object(outcome.get("info"), "outcome.info"),
        labels=labels,
        metadata=_object(data.get("metadata"), "metadata"),
    )


def first_user_text(steps: list[Step]) -> str:
    return next((s.content for s in steps if s.role == "user"), "")


def default_task_id(steps: list[Step]) -> str:
    """A task id for records that carry none: the same first user message is the same task."""
    digest = hashlib.sha256(first_user_text(steps).encode()).hexdigest()
    return f"task-{digest[:12]}"
