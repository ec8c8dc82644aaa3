"""`stepwise`: TRL's stepwise-supervision format, `prompt` / `completions` / `labels` (PRM).

Plain text, not conversational: the prompt is the messages before the first assistant step
(the task's instruction when the run opens with its agent, as multi-agent logs do), and each
completion is one assistant step preceded by what the agent saw since its previous
step (tool results, user replies), so a step's label never sees that step's consequences.
A failed run with a known first critical step stops at that step.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from curation.exports.base import Builder, Row, Skip
from curation.exports.messages import StepRow, as_text, first_assistant
from curation.exports.reading import Run
from curation.exports.spec import ExportSpec
from curation.exports.steplabels import derived_label, explicit_labels


def schema(spec: ExportSpec) -> pa.Schema:
    return pa.schema(
        [
            ("prompt", pa.string()),
            ("completions", pa.list_(pa.string())),
            ("labels", pa.list_(pa.bool_())),
            ("step_indices", pa.list_(pa.int64())),
            ("trajectory_id", pa.int64()),
            ("task_id", pa.string()),
            ("verdict_source", pa.string()),
        ]
    )


def _text(steps: list[StepRow]) -> str:
    return "\n\n".join(as_text(s) for s in steps)


def _row(run: Run, labels: dict[int, bool]) -> Row | Skip:
    start = first_assistant(run.steps)
    if start is None:
        return Skip("no assistant step")
    end = len(run.steps)
    if run.verdict != "success" and run.critical_step is not None:
        if run.critical_step >= end or run.steps[run.critical_step].role != "assistant":
            return Skip("the first critical step is not an assistant step")
        end = run.critical_step + 1
    completions: list[str] = []
    good: list[bool] = []
    indices: list[int] = []
    seen: list[StepRow] = []
    for step in run.steps[start:end]:
        seen.append(step)
        if step.role != "assistant":
            continue
        label = labels.get(step.index, derived_label(run, step.index))
        if label is None:
            return Skip("a step has no label")
        completions.append(_text(seen))
        good.append(label)
        indices.append(step.index)
        seen = []
    return Row(
        run,
        {
            "prompt": _text(list(run.steps[:start])) if start else run.instruction,
            "completions": completions,
            "labels": good,
            "step_indices": indices,
            "trajectory_id": run.id,
            "task_id": run.task,
            "verdict_source": run.verdict_source,
        },
    )


def build(batch: list[Run], spec: ExportSpec) -> Iterator[Row | Skip]:
    labels = explicit_labels([r.id for r in batch], spec.step_threshold)
    for run in batch:
        yield _row(run, labels.get(run.id, {}))


BUILDER = Builder(
    name="stepwise",
    summary=(
        "One row per run, one completion per assistant step, each labelled good or bad. "
        "Explicit step labels and scores win (human > judge > reward model; labels progress "
        "and exploration are good, no_progress, regression and error bad; a score alone is "
        "good at or above `step_threshold`). Otherwise the run's effective label decides: "
        "all steps of a success are good; a failure's steps before its first critical step "
        "are good, that step is bad, and the row stops there. Runs with an unlabelled step "
        "are left out."
    ),
    columns={
        "prompt": "the messages before the first assistant step, as text "
        "(`role (name): content`, one message per paragraph); the task's instruction when "
        "the run opens with an assistant step",
        "completions": "one per assistant step: the tool results and user replies since the "
        "previous assistant step, then the step; tool calls as `<tool_call>{json}</tool_call>`",
        "labels": "true = a good step, false = a bad one",
        "step_indices": "the step index of each completion's assistant step",
        "trajectory_id": "the run in the studio",
        "task_id": "the task; the train/test split is by task",
        "verdict_source": "where the run's verdict came from",
    },
    content=("prompt", "completions", "labels"),
    schema=schema,
    build=build,
    conversational=False,
    task_fields=("instruction",),
)
