"""`rl_prefix`: prompt-only rows, the verified prefix of a failed run before its first critical
error, with the task's reference beside it; short-horizon RL (SCoRe) starts from there."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from curation.exports.base import Builder, Row, Skip
from curation.exports.messages import dumps, messages, prompt_problem
from curation.exports.reading import Run
from curation.exports.schema import MESSAGES
from curation.exports.spec import ExportSpec


def schema(spec: ExportSpec) -> pa.Schema:
    return pa.schema(
        [
            ("prompt", MESSAGES),
            ("tools", pa.string()),
            ("reference", pa.string()),
            ("task_id", pa.string()),
            ("trajectory_id", pa.int64()),
            ("critical_step", pa.int64()),
            ("critical_step_source", pa.string()),
        ]
    )


def build(batch: list[Run], spec: ExportSpec) -> Iterator[Row | Skip]:
    for run in batch:
        critical = run.critical_step or 0
        if critical >= len(run.steps):
            yield Skip("the first critical step is past the last step")
            continue
        prompt = run.steps[:critical]
        if problem := prompt_problem(prompt):
            yield Skip(problem)
            continue
        yield Row(
            run,
            {
                "prompt": messages(prompt),
                "tools": run.tools,
                "reference": dumps(run.reference),
                "task_id": run.task,
                "trajectory_id": run.id,
                "critical_step": critical,
                "critical_step_source": run.critical_step_source,
            },
        )


BUILDER = Builder(
    name="rl_prefix",
    summary=(
        "The verified prefix of each failed (or partial) run whose first critical step is "
        "known: every message before that step, for RL that starts where the run went wrong."
    ),
    columns={
        "prompt": "the messages before the first critical step (OpenAI chat format)",
        "tools": "the tool schemas as JSON text; null if there were none",
        "reference": "the task's reference / ground truth as JSON text",
        "task_id": "the task; the train/test split is by task",
        "trajectory_id": "the failed run",
        "critical_step": "index of the first critical step (the first step not in the prompt)",
        "critical_step_source": "where the critical step came from",
    },
    content=("prompt", "tools", "reference"),
    schema=schema,
    build=build,
    task_fields=("reference",),
)
