"""Recovery rates: accepted corrections over attempted ones, grouped by teacher, mode,
environment, error category of the original and the original's model. Attempted counts
every correction that finished generating or failed; queued and running ones are left out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from curation.models import Project
from workers.models import Correction

GROUPS = {
    "teacher": "batch__teacher__name",
    "mode": "batch__mode",
    "environment": "batch__environment",
    "category": "source__effective_label__error_category",
    "original model": "source__agent_model",
}
Status = Correction.Status


@dataclass
class Row:
    value: str
    attempted: int = 0
    accepted: int = 0
    rejected: int = 0
    unverified: int = 0
    failed: int = 0

    @property
    def rate(self) -> float | None:
        return self.accepted / self.attempted if self.attempted else None

    def as_dict(self) -> dict[str, Any]:
        return {**vars(self), "recovery_rate": self.rate}


def finished(project: Project) -> QuerySet[Correction]:
    return Correction.objects.filter(
        batch__project=project,
        status__in=[Status.ACCEPTED, Status.REJECTED, Status.GENERATED, Status.FAILED],
    )


def recovery(project: Project) -> dict[str, list[Row]]:
    """A table per grouping, rows by value, most attempted first."""
    fields = list(GROUPS.values())
    tables: dict[str, dict[str, Row]] = {name: {} for name in GROUPS}
    overall = Row("all")
    for record in finished(project).values("status", *fields):
        for name, field in GROUPS.items():
            value = record[field] or "(none)"
            _count(tables[name].setdefault(value, Row(value)), record["status"])
        _count(overall, record["status"])
    out = {"all": [overall]}
    for name, rows in tables.items():
        out[name] = sorted(rows.values(), key=lambda r: (-r.attempted, r.value))
    return out


def _count(row: Row, status: str) -> None:
    row.attempted += 1
    key = {
        Status.ACCEPTED: "accepted",
        Status.REJECTED: "rejected",
        Status.GENERATED: "unverified",
        Status.FAILED: "failed",
    }[status]
    setattr(row, key, getattr(row, key) + 1)


def as_dict(tables: dict[str, list[Row]]) -> dict[str, list[dict[str, Any]]]:
    return {name: [row.as_dict() for row in rows] for name, rows in tables.items()}
