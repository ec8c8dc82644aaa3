"""The canonical JSON Lines format itself (DESIGN.md section 4)."""

from __future__ import annotations

from curation.canonical import Record

NAME = "canonical"


def detect(obj: dict) -> bool:
    return "steps" in obj


def parse(obj: dict, source: str = "") -> dict:
    return obj


def dump(record: Record) -> dict:
    return record.to_dict()
