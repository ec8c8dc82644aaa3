"""Records in the form the database stores them, and the bulk writers of the fast path.

A record is encoded once: its JSON columns become text, its steps become row tuples, and its
content hash is taken from those same bytes. Rows then go in bulk: COPY on PostgreSQL,
multi-row INSERTs elsewhere; trajectory ids are allocated up front so no row has to come back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson
from django.db import connection
from django.db.models import Model

from curation.canonical import Record, encode_json

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
TRAJECTORY_COLUMNS = (
    "id",
    "project_id",
    "task_id",
    "external_id",
    "agent_model",
    "agent_role",
    "source_format",
    "success",
    "reward",
    "outcome_info",
    "toolset_id",
    "metadata",
    "step_count",
    "content_hash",
    "created_at",
)


@dataclass
class Encoded:
    tools: str
    metadata: str
    outcome_info: str
    reference: str
    task_metadata: str
    steps: list[tuple]  # STEP_COLUMNS without trajectory_id
    content_hash: str  # identity of the run for idempotent import: everything but its labels


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def encode(record: Record) -> Encoded:
    """Encode a record for storage; a RecordError names any field the database would refuse."""
    steps = [
        (
            index,
            step.role,
            step.name,
            step.content,
            step.reasoning,
            encode_json(
                [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in step.tool_calls],
                f"steps[{index}].tool_calls",
            ),
            step.tool_call_id,
            encode_json(step.metadata, f"steps[{index}].metadata"),
        )
        for index, step in enumerate(record.steps)
    ]
    columns = {
        "tools": encode_json(record.tools, "tools"),
        "metadata": encode_json(record.metadata, "metadata"),
        "outcome_info": encode_json(record.outcome_info, "outcome.info"),
        "reference": encode_json(record.reference, "task.reference"),
        "task_metadata": encode_json(record.task_metadata, "task.metadata"),
    }
    identity = [
        record.id,
        record.task_id,
        record.instruction,
        record.agent_model,
        record.agent_role,
        record.success,
        record.reward,
        columns,
        steps,
    ]
    content_hash = digest(orjson.dumps(identity, option=orjson.OPT_SORT_KEYS))
    return Encoded(**columns, steps=steps, content_hash=content_hash)


def allocate_ids(model: type[Model], count: int) -> list[int]:
    """Primary keys for `count` new rows, taken before they are written."""
    table = model._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [table, count],
            )
            return [row[0] for row in cursor.fetchall()]
        # SQLite: the import transaction holds the write lock (BEGIN IMMEDIATE), and ids a
        # deleted row once had are not handed out again (AUTOINCREMENT's sqlite_sequence).
        cursor.execute(
            f"SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = %s), 0),"
            f" COALESCE((SELECT MAX(id) FROM {table}), 0))",
            [table],
        )
        start = cursor.fetchone()[0] + 1
    return list(range(start, start + count))


def write_rows(table: str, columns: tuple[str, ...], rows: Iterable[tuple]) -> int:
    """Write rows in bulk: COPY on PostgreSQL, multi-row INSERTs elsewhere."""
    names = ", ".join(connection.ops.quote_name(c) for c in columns)
    if connection.vendor == "postgresql":
        return _copy(table, names, rows)
    return _insert(table, names, len(columns), rows)


def _copy(table: str, names: str, rows: Iterable[tuple]) -> int:
    count = 0
    # The raw psycopg cursor bypasses Django's wrapper: translate its errors to Django's, so a
    # refused row fails its batch like any other DatabaseError.
    with connection.cursor() as cursor, connection.wrap_database_errors:
        with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
    return count


def _insert(table: str, names: str, width: int, rows: Iterable[tuple], chunk: int = 500) -> int:
    # SQLite allows 32766 variables per statement; 500 rows of up to 16 columns stay below.
    count = 0
    buffer: list[Any] = []
    with connection.cursor() as cursor:
        for row in rows:
            buffer.extend(row)
            count += 1
            if len(buffer) == chunk * width:
                _insert_chunk(cursor, table, names, width, buffer)
                buffer = []
        if buffer:
            _insert_chunk(cursor, table, names, width, buffer)
    return count


def _insert_chunk(cursor: Any, table: str, names: str, width: int, values: list) -> None:
    row = "(" + ", ".join(["%s"] * width) + ")"
    rows = ", ".join([row] * (len(values) // width))
    cursor.execute(f"INSERT INTO {table} ({names}) VALUES {rows}", values)
