"""What every kind's builder is: a function from a batch of runs to rows, and what its
columns mean (the dataset card prints them)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from curation.exports.reading import Run
from curation.exports.spec import ExportSpec


@dataclass
class Row:
    run: Run  # the run the row is about: its task decides the split, its labels are counted
    data: dict[str, Any]


@dataclass
class Skip:
    """A run that gives no row, and why (counted in the manifest)."""

    reason: str


@dataclass(frozen=True)
class Builder:
    name: str
    summary: str  # what is included and why, for the dataset card
    columns: dict[str, str]  # column: meaning
    content: tuple[str, ...]  # the columns a model trains on: deduplicated and measured
    schema: Callable[[ExportSpec], pa.Schema]
    build: Callable[[list[Run], ExportSpec], Iterator[Row | Skip]]
    conversational: bool = True
    by_task: bool = False  # batches hold whole tasks, in task order
    task_fields: tuple[str, ...] = ()  # of the task: reference, instruction
