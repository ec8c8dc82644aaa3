"""Importers: one module per input format, each turning one raw record into the canonical dict.

A format module has `NAME`, `detect(obj) -> bool`, `parse(obj, source) -> dict` (canonical
shape, checked afterwards by `curation.canonical.validate`) and `dump(record) -> dict`, the
inverse, so every format round-trips through the canonical record.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from curation.canonical import Record, RecordError, validate
from curation.formats import canonical, openai_chat, sharegpt, tau_bench, who_and_when

# Detection order matters: the most specific shapes first.
FORMATS: dict[str, ModuleType] = {
    m.NAME: m for m in (canonical, tau_bench, who_and_when, openai_chat, sharegpt)
}


def detect(obj: Any) -> ModuleType:
    if isinstance(obj, dict):
        for module in FORMATS.values():
            if module.detect(obj):
                return module
        keys = ", ".join(sorted(obj)[:8]) or "none"
        raise RecordError(
            f"cannot tell the format from its keys ({keys}); expected one of: "
            "steps (canonical), traj+task_id (tau-bench), history (Who&When), "
            "messages (OpenAI chat), conversations (ShareGPT); or pass --format"
        )
    raise RecordError(f"a record must be a JSON object, got {type(obj).__name__}")


def to_record(obj: Any, format_name: str | None, source: str = "") -> tuple[Record, str]:
    """Parse one raw record with the named format (or the detected one) and validate it."""
    if format_name:
        module = FORMATS.get(format_name)
        if module is None:
            raise RecordError(
                f"unknown format {format_name!r}; expected one of: {', '.join(sorted(FORMATS))}"
            )
        if not isinstance(obj, dict):
            raise RecordError(f"a record must be a JSON object, got {type(obj).__name__}")
    else:
        module = detect(obj)
    try:
        raw = module.parse(obj, source)
    except KeyError as exc:  # --format named a format whose required key this record lacks
        raise RecordError(f"is missing (not a {module.NAME} record?)", str(exc.args[0])) from exc
    return validate(raw), module.NAME
