"""The output contract every judge answers in (DESIGN.md section 5), as JSON schemas bounded
by the trajectory at hand (step indices within it, categories from the project's taxonomy,
string lengths capped), and the parser that accepts a reply only when it validates.

The schemas are tight on purpose: a grammar-constrained decoder follows them exactly, so a
random model can only produce replies that validate. Confidence and scores are integers
(percent, tenths) because bounded integers are exact in every grammar engine.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import jsonschema

VERDICTS = ("success", "partial", "failure")
STEP_LABELS = ("progress", "exploration", "no_progress", "regression")
RATIONALE_MAX = 1000
AGENT_MAX = 100
SCORE_TENTHS = 10  # step scores are integers in [-10, 10], stored divided by 10
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class InvalidOutput(ValueError):
    """A reply that is not valid JSON or does not match the schema it was asked for."""


def _step(step_count: int) -> dict[str, Any]:
    return {"type": "integer", "minimum": 0, "maximum": max(step_count - 1, 0)}


def _text(max_length: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": max_length}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def step_labels_schema(step_count: int) -> dict[str, Any]:
    item = _object(
        {
            "step": _step(step_count),
            "label": {"enum": list(STEP_LABELS)},
            "score": {"type": "integer", "minimum": -SCORE_TENTHS, "maximum": SCORE_TENTHS},
        }
    )
    return {"type": "array", "items": item, "maxItems": max(step_count, 1)}


def judgement_schema(
    step_count: int, categories: list[str], with_steps: bool = False, verdict_free: bool = False
) -> dict[str, Any]:
    """The whole-trajectory judgement (strategy all_at_once, and the final answer of the
    others): verdict, first critical step, root cause step, category, agent, rationale.
    `verdict_free` admits "" as the verdict: a step critic suggests a step, not a verdict."""
    nullable_step = {"anyOf": [_step(step_count), {"type": "null"}]}
    properties: dict[str, Any] = {
        "verdict": {"enum": [*VERDICTS, ""] if verdict_free else list(VERDICTS)},
        "first_critical_step": nullable_step,
        "root_cause_step": nullable_step,
        "error_category": {"enum": [*categories, ""]},
        "responsible_agent": _text(AGENT_MAX),
        "rationale": _text(RATIONALE_MAX),
        "confidence": {"type": "integer", "minimum": 0, "maximum": 100},
    }
    if with_steps:
        properties["steps"] = step_labels_schema(step_count)
    return _object(properties)


def decisive_step_schema() -> dict[str, Any]:
    """Strategy step_by_step: is this one step the decisive error?"""
    return _object({"decisive": {"type": "boolean"}, "rationale": _text(RATIONALE_MAX)})


def half_schema() -> dict[str, Any]:
    """Strategy binary_search: does the decisive error lie in the first or the second half?"""
    return _object({"half": {"enum": ["first", "second"]}, "rationale": _text(RATIONALE_MAX)})


def step_scores_schema(step_count: int) -> dict[str, Any]:
    """Per-step scoring (TRIAGE-style): a label and a bounded score for each assistant step."""
    return _object({"steps": step_labels_schema(step_count)})


def _clean(value: Any) -> Any:
    """Drop raw control characters a decoder may put inside strings (tabs and newlines stay)."""
    if isinstance(value, str):
        return CONTROL.sub("", value)
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    return value


def _first_object(text: str) -> str:
    """The JSON object in a reply that wrapped it in prose or a ``` fence."""
    start = text.find("{")
    end = text.rfind("}")
    if start == -1 or end < start:
        raise InvalidOutput("the reply holds no JSON object")
    return text[start : end + 1]


def parse(text: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The reply as a dict that validates against `schema`, or InvalidOutput saying why."""
    try:
        value = json.loads(_first_object(text.strip()), strict=False)
    except json.JSONDecodeError as error:
        raise InvalidOutput(f"not valid JSON: {error}") from None
    value = _clean(value)
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError as error:
        where = "/".join(str(p) for p in error.absolute_path) or "the reply"
        raise InvalidOutput(f"{where}: {error.message}") from None
    return value


@dataclass
class Judgement:
    """A validated whole-trajectory judgement, in the Annotation's own fields."""

    verdict: str
    first_critical_step: int | None
    root_cause_step: int | None
    error_category: str
    responsible_agent: str
    rationale: str
    confidence: float
    step_labels: dict[int, tuple[str, float]] = field(default_factory=dict)

    @classmethod
    def from_reply(cls, reply: dict[str, Any]) -> Judgement:
        """From a reply that already validated against `judgement_schema`. A success names no
        critical step; a root cause after the critical step is moved onto it."""
        failed = reply["verdict"] != "success"
        critical = reply["first_critical_step"] if failed else None
        root = reply["root_cause_step"] if failed else None
        if critical is not None and (root is None or root > critical):
            root = critical
        return cls(
            verdict=reply["verdict"],
            first_critical_step=critical,
            root_cause_step=root,
            error_category=reply["error_category"] if failed else "",
            responsible_agent=reply["responsible_agent"].strip(),
            rationale=reply["rationale"].strip(),
            confidence=reply["confidence"] / 100,
            step_labels={
                s["step"]: (s["label"], s["score"] / SCORE_TENTHS) for s in reply.get("steps", [])
            },
        )
