"""From the selected runs to data files: build rows, drop those outside the length bounds and
exact duplicates, split by task, stop at the sample limit, write."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import closing
from pathlib import Path

import orjson
from django.db.models import QuerySet

from curation.exports.base import Builder, Row, Skip
from curation.exports.lengths import length
from curation.exports.manifest import Stats
from curation.exports.reading import Run, stream
from curation.exports.spec import ExportSpec
from curation.exports.split import split_of
from curation.exports.writing import DataFile, DatasetWriter

NOT_MEASURED = ("tools", "reference")  # context, not text the row trains on


def _rows(
    batches: Iterable[list[Run]],
    builder: Builder,
    spec: ExportSpec,
    stats: Stats,
    after_batch: Callable[[int], None],
) -> Iterator[Row]:
    for batch in batches:
        for item in builder.build(batch, spec):
            if isinstance(item, Skip):
                stats.skipped[item.reason] += 1
            else:
                yield item
        stats.runs_read += len(batch)
        after_batch(stats.runs_read)


def _length_problem(row: Row, builder: Builder, spec: ExportSpec) -> str | None:
    if spec.min_length is None and spec.max_length is None:
        return None
    measured = [row.data[c] for c in builder.content if c not in NOT_MEASURED]
    n = length(measured, spec.tokenizer)
    if spec.min_length is not None and n < spec.min_length:
        return "shorter than min_length"
    if spec.max_length is not None and n > spec.max_length:
        return "longer than max_length"
    return None


class SeenRows:
    """Fingerprints of the training columns of the rows written so far, kept in an SQLite file
    beside the data, so memory stays flat however many rows there are."""

    def __init__(self, path: Path, content: tuple[str, ...]) -> None:
        self.content = content
        self.db = sqlite3.connect(path)
        self.db.execute("PRAGMA journal_mode = OFF")
        self.db.execute("CREATE TABLE seen (fingerprint BLOB PRIMARY KEY) WITHOUT ROWID")

    def is_new(self, row: Row) -> bool:
        content = orjson.dumps([row.data[c] for c in self.content], option=orjson.OPT_SORT_KEYS)
        fingerprint = hashlib.blake2b(content, digest_size=16).digest()
        return self.db.execute("INSERT OR IGNORE INTO seen VALUES (?)", [fingerprint]).rowcount == 1

    def close(self) -> None:
        self.db.close()


def write_dataset(
    runs: QuerySet,
    builder: Builder,
    spec: ExportSpec,
    folder: Path,
    format_name: str,
    chunk_size: int,
    after_batch: Callable[[int], None],
) -> tuple[Stats, list[DataFile]]:
    """Write the rows of `runs` into `folder`; memory holds one batch."""
    stats = Stats()
    seen = SeenRows(folder / "seen.sqlite3", builder.content)
    writer = DatasetWriter(folder, format_name, builder.schema(spec))
    batches = stream(runs, chunk_size, builder.by_task, builder.task_fields)
    try:
        with closing(batches), closing(_rows(batches, builder, spec, stats, after_batch)) as rows:
            for row in rows:
                if problem := _length_problem(row, builder, spec):
                    stats.skipped[problem] += 1
                    continue
                if spec.dedup and not seen.is_new(row):
                    stats.duplicates += 1
                    continue
                split = split_of(row.run.task, spec.test_fraction, spec.split_seed)
                writer.write(split, row.data)
                stats.add(split, row.run)
                if spec.limit and stats.total >= spec.limit:
                    break
    finally:
        seen.close()
        files = writer.close()
    return stats, files
