"""Rows into files, one per split: JSON Lines (sorted keys) or Parquet (the kind's fixed Arrow
schema, fixed writer options, a row group every `GROUP_ROWS` rows or `GROUP_BYTES` of JSON,
whichever comes first, so memory holds one bounded row group). Nothing in a data file depends
on when or where it was written, so the same rows give the same bytes."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from curation.exports.split import SPLITS

GROUP_ROWS = 1000
GROUP_BYTES = 2 << 20
PARQUET_OPTIONS: dict[str, Any] = {
    "version": "2.6",
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": True,
}


def _with_statistics(schema: pa.Schema) -> list[str]:
    """Columns that get min/max statistics: numbers and booleans. A string column's would hold
    whole messages, in every row group's metadata, which stays in memory until the file ends."""
    return [f.name for f in schema if pa.types.is_integer(f.type) or pa.types.is_boolean(f.type)]


@dataclass
class DataFile:
    name: str
    split: str
    rows: int
    bytes: int
    sha256: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _json(data: dict[str, Any]) -> bytes:
    return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)


class _Jsonl:
    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.file: BinaryIO = open(path, "wb")  # closed by close()

    def write(self, data: dict[str, Any]) -> None:
        self.file.write(_json(data) + b"\n")

    def close(self) -> None:
        self.file.close()


class _Parquet:
    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows: list[dict[str, Any]] = []
        self.bytes = 0
        self.writer = pq.ParquetWriter(
            path, schema, write_statistics=_with_statistics(schema), **PARQUET_OPTIONS
        )

    def write(self, data: dict[str, Any]) -> None:
        self.rows.append(data)
        self.bytes += len(_json(data))
        if len(self.rows) >= GROUP_ROWS or self.bytes >= GROUP_BYTES:
            self._flush()

    def _flush(self) -> None:
        if self.rows:
            table = pa.Table.from_pylist(self.rows, schema=self.schema)
            self.writer.write_table(table, row_group_size=len(self.rows))
            # Arrow's pool keeps freed memory; without this, peak memory creeps up with size.
            pa.default_memory_pool().release_unused()
            self.rows, self.bytes = [], 0

    def close(self) -> None:
        self._flush()
        self.writer.close()


WRITERS = {"jsonl": _Jsonl, "parquet": _Parquet}


class DatasetWriter:
    """One file per split, created at the split's first row (an empty split has no file)."""

    def __init__(self, folder: Path, format_name: str, schema: pa.Schema) -> None:
        self.folder = folder
        self.format_name = format_name
        self.schema = schema
        self.open: dict[str, _Jsonl | _Parquet] = {}
        self.counts: dict[str, int] = {}

    def name(self, split: str) -> str:
        return f"{split}.{self.format_name}"

    def write(self, split: str, data: dict[str, Any]) -> None:
        if split not in self.open:
            path = self.folder / self.name(split)
            self.open[split] = WRITERS[self.format_name](path, self.schema)
            self.counts[split] = 0
        self.open[split].write(data)
        self.counts[split] += 1

    def close(self) -> list[DataFile]:
        files = []
        for split in SPLITS:
            if split in self.open:
                self.open[split].close()
                path = self.folder / self.name(split)
                size = path.stat().st_size
                files.append(DataFile(path.name, split, self.counts[split], size, sha256_of(path)))
        return files
