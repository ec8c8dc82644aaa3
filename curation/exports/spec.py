"""The filter spec of an export: parsed from plain data (form, API, CLI), checked field by field,
normalized so the same request always gives the same spec (and the same version series).

A bad value raises `FilterError` naming the field, before any export row or file exists.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

import orjson

from curation.canonical import AGENT_ROLES, VERDICTS

KINDS = ("sft", "preference", "unpaired", "stepwise", "rl_prefix")
FORMATS = ("jsonl", "parquet")
# The verdicts each kind can use; a verdict filter may only narrow them.
KIND_VERDICTS = {
    "sft": ("success",),
    "preference": ("failure", "success"),
    "unpaired": ("failure", "success"),
    "stepwise": ("failure", "partial", "success"),
    "rl_prefix": ("failure", "partial"),
}
# Options that belong to one kind only.
KIND_OPTIONS = {
    "loss_after_branch": "sft",
    "pairs": "preference",
    "step_threshold": "stepwise",
}
PAIRS = ("corrections", "outcome")
# Effective-label sources, best first (annotate/effective.py; gold labels count as human).
SOURCE_RANK = (
    "adjudicated",
    "humans_agree",
    "human",
    "outcome",
    "judge_panel",
    "judge",
    "heuristic",
)
HUMAN_LEVEL = SOURCE_RANK[:3]
MIN_SOURCES = ("gold", *SOURCE_RANK)
SORTED = orjson.OPT_SORT_KEYS


class FilterError(ValueError):
    """A filter the export cannot run with; `field` names it."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


@dataclass(frozen=True)
class ExportSpec:
    kind: str
    tasks: tuple[str, ...] = ()
    agent_models: tuple[str, ...] = ()
    agent_roles: tuple[str, ...] = ()
    verdicts: tuple[str, ...] = ()
    min_source: str = ""
    require_agreement: bool = False
    categories: tuple[str, ...] = ()
    step_score_min: float | None = None
    step_score_max: float | None = None
    min_steps: int | None = None
    max_steps: int | None = None
    min_length: int | None = None
    max_length: int | None = None
    tokenizer: str = ""
    dedup: bool = True
    test_fraction: float = 0.1
    split_seed: str = ""
    limit: int | None = None
    loss_after_branch: bool = False
    pairs: tuple[str, ...] = PAIRS
    step_threshold: float = 0.5

    @property
    def used_verdicts(self) -> tuple[str, ...]:
        return self.verdicts or KIND_VERDICTS[self.kind]

    def as_dict(self) -> dict[str, Any]:
        """The spec as stored and shown: every field of this kind, lists sorted; no `kind`."""
        data = asdict(self)
        del data["kind"]
        for name, kind in KIND_OPTIONS.items():
            if kind != self.kind:
                del data[name]
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    def key(self, format_name: str) -> str:
        """Identity of the (filter, format) a version series belongs to."""
        body = orjson.dumps({"filter": self.as_dict(), "format": format_name}, option=SORTED)
        return hashlib.sha256(body).hexdigest()


def _strings(field: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",")]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise FilterError(field, "expected a list of strings")
    return tuple(sorted({_no_nul(field, v) for v in value if v}))


def _no_nul(field: str, value: str) -> str:
    """PostgreSQL stores no NUL character in text or JSON, where filters are looked up and kept."""
    if "\x00" in value:
        raise FilterError(field, "NUL characters are not allowed")
    return value


def _choices(options: tuple[str, ...]) -> Callable[[str, Any], tuple[str, ...]]:
    def parse(field: str, value: Any) -> tuple[str, ...]:
        values = _strings(field, value)
        if bad := [v for v in values if v not in options]:
            raise FilterError(field, f"unknown value {bad[0]!r}; choose from {', '.join(options)}")
        return values

    return parse


def _choice(options: tuple[str, ...]) -> Callable[[str, Any], str]:
    def parse(field: str, value: Any) -> str:
        if value not in options:
            raise FilterError(field, f"unknown value {value!r}; choose from {', '.join(options)}")
        return value

    return parse


def _bool(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise FilterError(field, "expected true or false")
    return value


def _number(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FilterError(field, "expected a number")
    return float(value)


def _count(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise FilterError(field, "expected a whole number, 0 or more")
    return value


def _positive(field: str, value: Any) -> int:
    if _count(field, value) == 0:
        raise FilterError(field, "expected a whole number, 1 or more")
    return value


def _fraction(field: str, value: Any) -> float:
    number = _number(field, value)
    if not 0 <= number < 1:
        raise FilterError(field, "expected a fraction from 0 up to (not including) 1")
    return number


def _string(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise FilterError(field, "expected a string")
    return _no_nul(field, value.strip())


PARSERS: dict[str, Callable[[str, Any], Any]] = {
    "tasks": _strings,
    "agent_models": _strings,
    "agent_roles": _choices(AGENT_ROLES),
    "verdicts": _choices(VERDICTS),
    "min_source": _choice(MIN_SOURCES),
    "require_agreement": _bool,
    "categories": _strings,
    "step_score_min": _number,
    "step_score_max": _number,
    "min_steps": _count,
    "max_steps": _count,
    "min_length": _count,
    "max_length": _count,
    "tokenizer": _string,
    "dedup": _bool,
    "test_fraction": _fraction,
    "split_seed": _string,
    "limit": _positive,
    "loss_after_branch": _bool,
    "pairs": _choices(PAIRS),
    "step_threshold": _number,
}


def _check_bounds(spec: ExportSpec) -> None:
    for low, high in (
        ("step_score_min", "step_score_max"),
        ("min_steps", "max_steps"),
        ("min_length", "max_length"),
    ):
        lo, hi = getattr(spec, low), getattr(spec, high)
        if lo is not None and hi is not None and lo > hi:
            raise FilterError(low, f"{low} ({lo:g}) is above {high} ({hi:g})")


def parse_spec(kind: str, data: Mapping[str, Any]) -> ExportSpec:
    """The spec of a `kind` export from `data`; blank values (None, "", []) mean "not set"."""
    if kind not in KINDS:
        raise FilterError("kind", f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
    if not isinstance(data, Mapping):
        raise FilterError("filter", "expected an object of filters")
    values: dict[str, Any] = {}
    for field, value in data.items():
        if field not in PARSERS:
            raise FilterError(field, "unknown filter")
        if value is None or value == "" or value == []:
            continue
        if KIND_OPTIONS.get(field, kind) != kind:
            raise FilterError(field, f"applies to {KIND_OPTIONS[field]} exports only")
        values[field] = PARSERS[field](field, value)
    spec = replace(ExportSpec(kind=kind), **values)
    if unusable := [v for v in spec.verdicts if v not in KIND_VERDICTS[kind]]:
        raise FilterError(
            "verdicts",
            f"{kind} exports use {' and '.join(KIND_VERDICTS[kind])} runs only, not {unusable[0]}",
        )
    _check_bounds(spec)
    return spec
