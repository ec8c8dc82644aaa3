"""The one writer every importer shares: canonical records in, trajectories and steps out.

Records are written in batches, one transaction per batch. Steps go in bulk (COPY on
PostgreSQL, multi-row inserts elsewhere). When a batch fails in the database, it is retried one
record per transaction so the bad record is reported and the good ones still land; no
trajectory is ever left without its steps.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction

from curation.canonical import Record, RecordError
from curation.formats import to_record
from curation.formats.reading import RawItem
from curation.models import Project, Step, Task, Trajectory
from curation.signals import trajectories_imported

STEP_COLUMNS = (
    "trajectory_id",
    "index",
    "role",
    "name",
    "content",
    "reasoning",
    "tool_calls",
    "tool_call_id",
    "metadata",
)


@dataclass
class ImportSummary:
    created: int = 0
    duplicates: int = 0
    failed: int = 0
    steps: int = 0
    tasks_created: int = 0
    annotations: int = 0
    errors: list[dict] = field(default_factory=list)

    def add_error(self, where: RawItem | str, error: str) -> None:
        self.failed += 1
        if isinstance(where, RawItem):
            self.errors.append({"source": where.source, "location": where.location, "error": error})
        else:
            self.errors.append({"source": where, "location": "", "error": error})

    def as_dict(self) -> dict:
        return {
            "created": self.created,
            "duplicates": self.duplicates,
            "failed": self.failed,
            "steps": self.steps,
            "tasks_created": self.tasks_created,
            "annotations": self.annotations,
            "errors": self.errors,
        }


@dataclass
class Overrides:
    agent_model: str = ""
    agent_role: str = ""

    def apply(self, record: Record) -> None:
        if self.agent_model:
            record.agent_model = self.agent_model
        if self.agent_role:
            record.agent_role = self.agent_role


@dataclass
class _Pending:
    item: RawItem
    record: Record
    source_format: str
    content_hash: str


def parse_items(
    items: Iterable[RawItem],
    summary: ImportSummary,
    format_name: str | None = None,
    overrides: Overrides | None = None,
) -> Iterator[_Pending]:
    """Parsed, validated records; anything unreadable goes into `summary.errors`."""
    for item in items:
        if item.error:
            summary.add_error(item, item.error)
            continue
        try:
            record, fmt = to_record(item.obj, format_name, item.source)
            if overrides:
                overrides.apply(record)
            yield _Pending(item, record, fmt, record.content_hash())
        except RecordError as exc:
            summary.add_error(item, str(exc))
        except RecursionError:
            summary.add_error(item, "nested too deeply to store")


def import_items(
    project: Project,
    items: Iterable[RawItem],
    *,
    format_name: str | None = None,
    overrides: Overrides | None = None,
    batch_size: int | None = None,
    summary: ImportSummary | None = None,
) -> ImportSummary:
    """Import raw records into `project`, batch by batch, and say what happened."""
    summary = summary if summary is not None else ImportSummary()
    size = batch_size or settings.IMPORT_BATCH_SIZE
    batch: list[_Pending] = []
    for pending in parse_items(items, summary, format_name, overrides):
        batch.append(pending)
        if len(batch) >= size:
            _write_batch(project, batch, summary)
            batch = []
    if batch:
        _write_batch(project, batch, summary)
    return summary


def _write_batch(project: Project, batch: list[_Pending], summary: ImportSummary) -> None:
    fresh = _drop_duplicates(project, batch, summary)
    if not fresh:
        return
    try:
        with transaction.atomic():
            counts = _insert(project, fresh)
    except DatabaseError:
        # Find the bad record: one transaction each, the good ones land.
        for pending in fresh:
            try:
                with transaction.atomic():
                    if Trajectory.objects.filter(
                        project=project, content_hash=pending.content_hash
                    ).exists():
                        summary.duplicates += 1  # a concurrent import wrote it first
                        continue
                    one = _insert(project, [pending])
            except DatabaseError as exc:
                summary.add_error(pending.item, f"the database refused it: {exc}".strip())
            else:
                _add_counts(summary, one)
        return
    _add_counts(summary, counts)


def _add_counts(summary: ImportSummary, counts: dict[str, int]) -> None:
    for key, value in counts.items():
        setattr(summary, key, getattr(summary, key) + value)


def _drop_duplicates(
    project: Project, batch: list[_Pending], summary: ImportSummary
) -> list[_Pending]:
    hashes = {p.content_hash for p in batch}
    known = set(
        Trajectory.objects.filter(project=project, content_hash__in=hashes).values_list(
            "content_hash", flat=True
        )
    )
    fresh: list[_Pending] = []
    for pending in batch:
        if pending.content_hash in known:
            summary.duplicates += 1
        else:
            known.add(pending.content_hash)
            fresh.append(pending)
    return fresh


def _tasks_for(project: Project, records: list[Record]) -> tuple[dict[str, Task], int]:
    wanted = {r.task_id: r for r in reversed(records)}  # first record of a task describes it
    tasks = {t.external_id: t for t in Task.objects.filter(project=project, external_id__in=wanted)}
    missing = [
        Task(
            project=project,
            external_id=task_id,
            instruction=r.instruction,
            reference=r.reference,
            metadata=r.task_metadata,
        )
        for task_id, r in wanted.items()
        if task_id not in tasks
    ]
    if missing:
        # ignore_conflicts: a concurrent import may create the same task first.
        Task.objects.bulk_create(missing, ignore_conflicts=True)
        created = Task.objects.filter(
            project=project, external_id__in=[t.external_id for t in missing]
        )
        tasks.update({t.external_id: t for t in created})
    return tasks, len(missing)


def _insert(project: Project, batch: list[_Pending]) -> dict[str, int]:
    tasks, tasks_created = _tasks_for(project, [p.record for p in batch])
    trajectories = Trajectory.objects.bulk_create(
        [
            Trajectory(
                project=project,
                task=tasks[p.record.task_id],
                external_id=p.record.id,
                agent_model=p.record.agent_model,
                agent_role=p.record.agent_role,
                source_format=p.source_format,
                success=p.record.success,
                reward=p.record.reward,
                outcome_info=p.record.outcome_info,
                tools=p.record.tools,
                metadata=p.record.metadata,
                step_count=len(p.record.steps),
                content_hash=p.content_hash,
            )
            for p in batch
        ]
    )
    rows = (
        row
        for trajectory, p in zip(trajectories, batch, strict=True)
        for row in step_rows(trajectory.pk, p.record)
    )
    steps = write_step_rows(rows)
    records = [p.record for p in batch]
    responses = trajectories_imported.send(
        sender=Project, project=project, trajectories=trajectories, records=records
    )
    annotations = sum(r for _, r in responses if isinstance(r, int))
    return {
        "created": len(trajectories),
        "steps": steps,
        "tasks_created": tasks_created,
        "annotations": annotations,
    }


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def step_rows(trajectory_id: int, record: Record) -> Iterator[tuple]:
    """Step rows in STEP_COLUMNS order, JSON columns already encoded."""
    for index, step in enumerate(record.steps):
        yield (
            trajectory_id,
            index,
            step.role,
            step.name,
            step.content,
            step.reasoning,
            _dumps(
                [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in step.tool_calls]
            ),
            step.tool_call_id,
            _dumps(step.metadata),
        )


def write_step_rows(rows: Iterable[tuple]) -> int:
    """Write step rows in bulk: COPY on PostgreSQL, multi-row INSERTs elsewhere."""
    if connection.vendor == "postgresql":
        return _copy_steps(rows)
    return _insert_steps(rows)


def _copy_steps(rows: Iterable[tuple]) -> int:
    table = Step._meta.db_table
    columns = ", ".join(connection.ops.quote_name(c) for c in STEP_COLUMNS)
    count = 0
    # The raw psycopg cursor bypasses Django's wrapper: translate its errors to Django's, so a
    # refused row fails its batch like any other DatabaseError.
    with connection.cursor() as cursor, connection.wrap_database_errors:
        with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
    return count


def _insert_steps(rows: Iterable[tuple], chunk: int = 500) -> int:
    table = Step._meta.db_table
    columns = ", ".join(connection.ops.quote_name(c) for c in STEP_COLUMNS)
    # SQLite allows 32766 variables per statement; 500 rows x 9 columns stays well below.
    count = 0
    buffer: list[tuple] = []
    with connection.cursor() as cursor:
        for row in rows:
            buffer.append(row)
            if len(buffer) == chunk:
                count += _insert_chunk(cursor, table, columns, buffer)
                buffer = []
        if buffer:
            count += _insert_chunk(cursor, table, columns, buffer)
    return count


def _insert_chunk(cursor: Any, table: str, columns: str, rows: list[tuple]) -> int:
    placeholders = ", ".join(["(" + ", ".join(["%s"] * len(STEP_COLUMNS)) + ")"] * len(rows))
    cursor.execute(
        f"INSERT INTO {table} ({columns}) VALUES {placeholders}",
        [value for row in rows for value in row],
    )
    return len(rows)
