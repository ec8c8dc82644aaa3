"""`unpaired`: conversational `prompt` / `completion` / `label` rows (KTO).

A successful run is one desirable completion after its opening messages. A failed run with a
known first critical step is an undesirable completion from that step, its verified prefix
being the prompt, so the steps before the error are not marked bad; without one the whole run
after its opening is. An accepted correction is a desirable completion from its branch step.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from curation.exports.base import Builder, Row, Skip
from curation.exports.messages import first_assistant, messages, prompt_problem
from curation.exports.reading import Run
from curation.exports.schema import MESSAGES
from curation.exports.spec import ExportSpec


def schema(spec: ExportSpec) -> pa.Schema:
    return pa.schema(
        [
            ("prompt", MESSAGES),
            ("completion", MESSAGES),
            ("label", pa.bool_()),
            ("tools", pa.string()),
            ("trajectory_id", pa.int64()),
            ("task_id", pa.string()),
            ("start_step", pa.int64()),
            ("verdict_source", pa.string()),
        ]
    )


def start_of(run: Run) -> int | None:
    """Index of the first completion step."""
    if run.is_correction:
        return run.branch_step
    critical = run.critical_step
    if run.verdict == "failure" and critical and critical < len(run.steps):
        return critical
    return first_assistant(run.steps)


def build(batch: list[Run], spec: ExportSpec) -> Iterator[Row | Skip]:
    for run in batch:
        start = start_of(run)
        if start is None:
            yield Skip("no assistant message")
            continue
        if problem := prompt_problem(run.steps[:start]):
            yield Skip(problem)
            continue
        yield Row(
            run,
            {
                "prompt": messages(run.steps[:start]),
                "completion": messages(run.steps[start:]),
                "label": run.verdict == "success",
                "tools": run.tools,
                "trajectory_id": run.id,
                "task_id": run.task,
                "start_step": start,
                "verdict_source": run.verdict_source,
            },
        )


BUILDER = Builder(
    name="unpaired",
    summary=(
        "One row per run: successful runs and accepted corrections are desirable completions "
        "(label true), failed runs undesirable ones (label false). A failure whose first "
        "critical step is known is cut there: the verified prefix is the prompt."
    ),
    columns={
        "prompt": "the messages before the completion (OpenAI chat format)",
        "completion": "the run from `start_step` to its end",
        "label": "true for a success or an accepted correction, false for a failure",
        "tools": "the tool schemas as JSON text; null if there were none",
        "trajectory_id": "the run in the studio",
        "task_id": "the task; the train/test split is by task",
        "start_step": "index of the first completion step: the first assistant step, the "
        "first critical step of a failure, or the branch step of a correction",
        "verdict_source": "where the verdict behind the label came from",
    },
    content=("prompt", "completion", "label", "tools"),
    schema=schema,
    build=build,
)
