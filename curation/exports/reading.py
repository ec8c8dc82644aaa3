"""Runs streamed from the database in batches: one server-side cursor over the trajectories
(`.iterator(chunk_size=...)`), and per batch one query for their steps and one for their tool
schemas. Memory holds one batch, whatever the size of the export."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet

from curation.exports.messages import STEP_FIELDS, StepRow, dumps
from curation.models import Step, ToolSet

FIELDS = {
    "id": "id",
    "task_pk": "task_id",
    "task": "task__external_id",
    "agent_model": "agent_model",
    "agent_role": "agent_role",
    "parent_id": "parent_id",
    "branch_step": "branch_step",
    "toolset_id": "toolset_id",
    "verdict": "effective_label__verdict",
    "verdict_source": "effective_label__verdict_source",
    "critical_step": "effective_label__first_critical_step",
    "critical_step_source": "effective_label__first_critical_step_source",
    "category": "effective_label__error_category",
}


@dataclass
class Run:
    """A trajectory as exports see it: named fields, its effective label, its steps."""

    id: int
    task_pk: int
    task: str
    agent_model: str
    agent_role: str
    parent_id: int | None
    branch_step: int | None
    toolset_id: int | None
    verdict: str | None
    verdict_source: str | None
    critical_step: int | None
    critical_step_source: str | None
    category: str | None
    reference: Any = None  # task fields, read for the kinds that use them
    instruction: str = ""
    tools: str | None = None  # JSON text of the tool schemas; None when the run had none
    steps: tuple[StepRow, ...] = ()

    @property
    def is_correction(self) -> bool:
        return self.agent_role == "correction" and self.branch_step is not None


def _run(row: dict[str, Any], task_fields: tuple[str, ...] = ()) -> Run:
    run = Run(**{name: row[field] for name, field in FIELDS.items()})
    for name in task_fields:
        setattr(run, name, row[f"task__{name}"])
    return run


def attach(runs: list[Run]) -> list[Run]:
    """Fill in the steps and tool schemas of `runs` (two queries)."""
    if not runs:
        return runs
    ids = [r.id for r in runs]
    steps: dict[int, list[StepRow]] = {pk: [] for pk in ids}
    rows = (
        Step.objects.filter(trajectory_id__in=ids)
        .order_by("trajectory_id", "index")
        .values_list("trajectory_id", *STEP_FIELDS)
    )
    for trajectory_id, *fields in rows:
        steps[trajectory_id].append(StepRow(*fields))
    toolset_ids = {r.toolset_id for r in runs if r.toolset_id is not None}
    tools = {
        pk: dumps(value)
        for pk, value in ToolSet.objects.filter(pk__in=toolset_ids).values_list("pk", "tools")
    }
    for run in runs:
        run.steps = tuple(steps[run.id])
        run.tools = tools.get(run.toolset_id)
    return runs


def _batches(rows: Iterable[Run], size: int, keep_tasks_whole: bool) -> Iterator[list[Run]]:
    batch: list[Run] = []
    for run in rows:
        full = len(batch) >= size
        if full and (not keep_tasks_whole or run.task_pk != batch[-1].task_pk):
            yield batch
            batch = []
        batch.append(run)
    if batch:
        yield batch


def stream(
    queryset: QuerySet,
    chunk_size: int,
    by_task: bool = False,
    task_fields: tuple[str, ...] = (),
) -> Iterator[list[Run]]:
    """Batches of about `chunk_size` runs with their steps, in id order (or task then id order,
    with every task's runs in one batch, when `by_task`); `task_fields`: `reference` and/or
    `instruction` of their tasks."""
    order = ("task_id", "id") if by_task else ("id",)
    names = [*FIELDS.values(), *(f"task__{name}" for name in task_fields)]
    rows = queryset.order_by(*order).values(*names).iterator(chunk_size=chunk_size)
    runs = (_run(row, task_fields) for row in rows)
    for batch in _batches(runs, chunk_size, by_task):
        yield attach(batch)


def fetch(queryset: QuerySet) -> list[Run]:
    """All runs of a small queryset with their steps, in id order (three queries)."""
    return attach([_run(row) for row in queryset.order_by("id").values(*FIELDS.values())])
