"""The one writer every importer shares: canonical records in, trajectories and steps out.

Records are written in batches, one transaction per batch. Steps go in bulk (COPY on
PostgreSQL, multi-row inserts elsewhere). When a batch fails in the database, it is retried one
record per transaction so the bad record is reported and the good ones still land; no
trajectory is ever left without its steps.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import orjson
from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from curation.background import in_background
from curation.canonical import Record, RecordError
from curation.formats import to_record
from curation.formats.reading import RawItem
from curation.models import Project, Step, Task, ToolSet, Trajectory
from curation.signals import trajectories_imported
from curation.storage import (
    STEP_COLUMNS,
    TRAJECTORY_COLUMNS,
    Encoded,
    allocate_ids,
    digest,
    encode,
    write_rows,
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
    encoded: Encoded

    @property
    def content_hash(self) -> str:
        return self.encoded.content_hash


@dataclass
class _Failed:
    item: RawItem
    error: str


def parse_items(
    items: Iterable[RawItem],
    format_name: str | None = None,
    overrides: Overrides | None = None,
) -> Iterator[_Pending | _Failed]:
    """Parsed, validated and encoded records, or what was wrong with them. No database use:
    this runs in the parsing thread."""
    for item in items:
        if item.error:
            yield _Failed(item, item.error)
            continue
        try:
            record, fmt = to_record(item.obj, format_name, item.source)
            if overrides:
                overrides.apply(record)
            yield _Pending(item, record, fmt, encode(record))
        except RecordError as exc:
            yield _Failed(item, str(exc))
        except RecursionError:
            yield _Failed(item, "nested too deeply to store")


def import_items(
    project: Project,
    items: Iterable[RawItem],
    *,
    format_name: str | None = None,
    overrides: Overrides | None = None,
    batch_size: int | None = None,
    summary: ImportSummary | None = None,
    after_batch: Callable[[ImportSummary], None] | None = None,
) -> ImportSummary:
    """Import raw records into `project`, batch by batch, and say what happened.

    `items` is read and parsed in a thread one batch ahead of the writes; `after_batch` is
    called (in this thread) after each batch is written, for progress reports.
    """
    summary = summary if summary is not None else ImportSummary()
    size = batch_size or settings.IMPORT_BATCH_SIZE
    batch: list[_Pending] = []
    parsed = in_background(parse_items(items, format_name, overrides), size, "import-parser")
    with _collector_paused():
        for result in parsed:
            if isinstance(result, _Failed):
                summary.add_error(result.item, result.error)
                continue
            batch.append(result)
            if len(batch) >= size:
                _write_batch(project, batch, summary)
                batch = []
                if after_batch:
                    after_batch(summary)
        if batch:
            _write_batch(project, batch, summary)
    return summary


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Parsed JSON is acyclic and freed by reference counting, but the cyclic collector would
    walk every record of the batch again and again: about 40% of the import's CPU."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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


def _task_ids(project: Project, records: list[Record]) -> tuple[dict[str, int], int]:
    """Ids of the records' tasks by external id, creating the missing ones."""
    wanted = {r.task_id: r for r in reversed(records)}  # first record of a task describes it
    in_project = Task.objects.filter(project=project)
    ids = dict(in_project.filter(external_id__in=wanted).values_list("external_id", "pk"))
    missing = [
        Task(
            project=project,
            external_id=task_id,
            instruction=r.instruction,
            reference=r.reference,
            metadata=r.task_metadata,
        )
        for task_id, r in wanted.items()
        if task_id not in ids
    ]
    if missing:
        # ignore_conflicts: a concurrent import may create the same task first.
        Task.objects.bulk_create(missing, ignore_conflicts=True)
        created = in_project.filter(external_id__in=[t.external_id for t in missing])
        ids.update(created.values_list("external_id", "pk"))
    return ids, len(missing)


def _toolset_ids(project: Project, encoded: set[str]) -> dict[str, int]:
    """Ids of the tool sets (by their encoded JSON), creating the missing ones; none for []."""
    by_hash = {digest(tools.encode()): tools for tools in encoded if tools != "[]"}
    if not by_hash:
        return {}
    in_project = ToolSet.objects.filter(project=project, content_hash__in=by_hash)
    ids = dict(in_project.values_list("content_hash", "pk"))
    missing = [
        ToolSet(project=project, content_hash=h, tools=orjson.loads(tools))
        for h, tools in by_hash.items()
        if h not in ids
    ]
    if missing:
        ToolSet.objects.bulk_create(missing, ignore_conflicts=True)
        ids = dict(in_project.values_list("content_hash", "pk"))
    return {by_hash[h]: pk for h, pk in ids.items()}


def _insert(project: Project, batch: list[_Pending]) -> dict[str, int]:
    task_ids, tasks_created = _task_ids(project, [p.record for p in batch])
    toolset_ids = _toolset_ids(project, {p.encoded.tools for p in batch})
    ids = allocate_ids(Trajectory, len(batch))
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    write_rows(
        Trajectory._meta.db_table,
        TRAJECTORY_COLUMNS,
        (
            (
                trajectory_id,
                project.pk,
                task_ids[p.record.task_id],
                p.record.id,
                p.record.agent_model,
                p.record.agent_role,
                p.source_format,
                p.record.success,
                p.record.reward,
                p.encoded.outcome_info,
                toolset_ids.get(p.encoded.tools),
                p.encoded.metadata,
                len(p.encoded.steps),
                p.content_hash,
                now,
            )
            for trajectory_id, p in zip(ids, batch, strict=True)
        ),
    )
    steps = write_rows(
        Step._meta.db_table,
        STEP_COLUMNS,
        (
            (trajectory_id, *row)
            for trajectory_id, p in zip(ids, batch, strict=True)
            for row in p.encoded.steps
        ),
    )
    responses = trajectories_imported.send(
        sender=Project, project=project, trajectory_ids=ids, records=[p.record for p in batch]
    )
    annotations = sum(r for _, r in responses if isinstance(r, int))
    return {
        "created": len(ids),
        "steps": steps,
        "tasks_created": tasks_created,
        "annotations": annotations,
    }
