"""Arrow types of the exported columns; Parquet files are written with these exact schemas."""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 1

TOOL_CALL = pa.struct(
    [
        ("id", pa.string()),
        ("type", pa.string()),
        ("function", pa.struct([("name", pa.string()), ("arguments", pa.string())])),
    ]
)
MESSAGE_FIELDS = [
    ("role", pa.string()),
    ("content", pa.string()),
    ("name", pa.string()),
    ("tool_calls", pa.list_(TOOL_CALL)),
    ("tool_call_id", pa.string()),
]
MESSAGES = pa.list_(pa.struct(MESSAGE_FIELDS))
WEIGHTED_MESSAGES = pa.list_(pa.struct([*MESSAGE_FIELDS, ("weight", pa.int64())]))
