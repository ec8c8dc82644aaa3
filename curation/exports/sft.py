"""`sft`: whole conversations (`messages` + `tools`) of successful runs and accepted corrections."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from curation.exports.base import Builder, Row, Skip
from curation.exports.messages import first_assistant, message
from curation.exports.reading import Run
from curation.exports.schema import MESSAGES, WEIGHTED_MESSAGES
from curation.exports.spec import ExportSpec


def schema(spec: ExportSpec) -> pa.Schema:
    return pa.schema(
        [
            ("messages", WEIGHTED_MESSAGES if spec.loss_after_branch else MESSAGES),
            ("tools", pa.string()),
            ("trajectory_id", pa.int64()),
            ("task_id", pa.string()),
            ("agent_model", pa.string()),
            ("source", pa.string()),
            ("verdict_source", pa.string()),
        ]
    )


def build(batch: list[Run], spec: ExportSpec) -> Iterator[Row | Skip]:
    for run in batch:
        if first_assistant(run.steps) is None:
            yield Skip("no assistant message")
            continue
        # With loss_after_branch, a correction trains only on the teacher's steps.
        start = run.branch_step if run.is_correction else 0
        messages = [
            message(s, int(s.role == "assistant" and s.index >= start))
            if spec.loss_after_branch
            else message(s)
            for s in run.steps
        ]
        yield Row(
            run,
            {
                "messages": messages,
                "tools": run.tools,
                "trajectory_id": run.id,
                "task_id": run.task,
                "agent_model": run.agent_model,
                "source": "correction" if run.is_correction else "run",
                "verdict_source": run.verdict_source,
            },
        )


BUILDER = Builder(
    name="sft",
    summary=(
        "Whole conversations of runs whose effective verdict is success, and of accepted "
        "corrections (the verified prefix followed by the teacher's steps)."
    ),
    columns={
        "messages": "the conversation, OpenAI chat format; assistant tool calls as "
        "`tool_calls: [{id, type: function, function: {name, arguments (JSON text)}}]`. "
        "With `loss_after_branch`, each message has `weight`: 1 = train on it (assistant "
        "messages; in a correction only those from the branch step on), 0 = context only",
        "tools": "the run's tool schemas as JSON text (TRL parses it); null if it had none",
        "trajectory_id": "the run in the studio",
        "task_id": "the task; the train/test split is by task",
        "agent_model": "the model that wrote the run",
        "source": "`run` or `correction`",
        "verdict_source": "where the success verdict came from",
    },
    content=("messages", "tools"),
    schema=schema,
    build=build,
)
