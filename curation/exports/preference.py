"""`preference`: conversational `prompt` / `chosen` / `rejected` pairs (DPO).

Correction pairs: the prompt is the failed run before the branch step, chosen is the accepted
correction from there, rejected is the original from there. A correction that regenerated one
step is compared with that one original step; a rollout with the original to its end.
Outcome pairs: a failed run and a successful run of the same task that share every message up
to an assistant step where they part (tool call ids aside); the prompt is what they share.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from itertools import groupby

import pyarrow as pa

from curation.exports.base import Builder, Row, Skip
from curation.exports.corrections import accepted_corrections
from curation.exports.messages import StepRow, messages, prompt_problem
from curation.exports.reading import Run, fetch
from curation.exports.schema import MESSAGES
from curation.exports.spec import ExportSpec
from curation.models import Trajectory


def schema(spec: ExportSpec) -> pa.Schema:
    return pa.schema(
        [
            ("prompt", MESSAGES),
            ("chosen", MESSAGES),
            ("rejected", MESSAGES),
            ("tools", pa.string()),
            ("task_id", pa.string()),
            ("pair_type", pa.string()),
            ("branch_step", pa.int64()),
            ("chosen_trajectory_id", pa.int64()),
            ("rejected_trajectory_id", pa.int64()),
        ]
    )


def _row(
    rejected_run: Run, chosen_run: Run, kind: str, k: int, rejected: Sequence[StepRow]
) -> Row | Skip:
    prompt, chosen = rejected_run.steps[:k], chosen_run.steps[k:]
    if problem := prompt_problem(prompt):
        return Skip(problem)
    if not chosen or not rejected:
        return Skip("nothing to compare after the branch step")
    if messages(chosen) == messages(rejected):
        return Skip("chosen and rejected are the same")
    return Row(
        rejected_run,
        {
            "prompt": messages(prompt),
            "chosen": messages(chosen),
            "rejected": messages(rejected),
            "tools": rejected_run.tools,
            "task_id": rejected_run.task,
            "pair_type": kind,
            "branch_step": k,
            "chosen_trajectory_id": chosen_run.id,
            "rejected_trajectory_id": rejected_run.id,
        },
    )


def correction_pair(original: Run, correction: Run) -> Row | Skip:
    k = correction.branch_step or 0
    one_step = len(correction.steps) == k + 1
    rejected = original.steps[k : k + 1] if one_step else original.steps[k:]
    return _row(original, correction, "correction", k, rejected)


def _same(a: StepRow, b: StepRow) -> bool:
    """Steps alike but for tool call ids (every run numbers its calls its own way)."""
    calls = [[(c.get("name"), c.get("arguments")) for c in s.tool_calls] for s in (a, b)]
    return (a.role, a.name, a.content, calls[0]) == (b.role, b.name, b.content, calls[1])


def _parting(a: Run, b: Run) -> int | None:
    """Where two runs part, if it is at an assistant step of both."""
    shared = 0
    for x, y in zip(a.steps, b.steps, strict=False):
        if not _same(x, y):
            break
        shared += 1
    if shared >= min(len(a.steps), len(b.steps)):
        return None
    return shared if a.steps[shared].role == b.steps[shared].role == "assistant" else None


def outcome_pair(failure: Run, successes: list[Run]) -> Row | Skip:
    best: tuple[int, Run] | None = None
    for success in successes:
        k = _parting(failure, success)
        if k is not None and (best is None or k > best[0]):
            best = (k, success)
    if best is None:
        return Skip("no successful run of the task parts from it at an assistant step")
    k, success = best
    return _row(failure, success, "outcome", k, failure.steps[k:])


def _corrections(batch: list[Run]) -> dict[int, list[Run]]:
    """Accepted corrections of the failed runs in the batch, by original (three queries)."""
    failed = [r.id for r in batch if r.verdict == "failure"]
    if not failed:
        return {}
    by_parent: dict[int, list[Run]] = defaultdict(list)
    queryset = Trajectory.objects.filter(accepted_corrections(), parent_id__in=failed)
    for correction in fetch(queryset):
        by_parent[correction.parent_id].append(correction)
    return by_parent


def build(batch: list[Run], spec: ExportSpec) -> Iterator[Row | Skip]:
    corrections = _corrections(batch) if "corrections" in spec.pairs else {}
    for _, group in groupby(batch, key=lambda r: r.task_pk):
        runs = list(group)
        successes = [r for r in runs if r.verdict == "success"]
        for run in runs:
            for correction in corrections.get(run.id, ()):
                yield correction_pair(run, correction)
            if "outcome" in spec.pairs and run.verdict == "failure":
                yield outcome_pair(run, successes)


BUILDER = Builder(
    name="preference",
    summary=(
        "Pairs of continuations of the same prompt. `correction` pairs: a failed run and an "
        "accepted correction of it; the prompt is the verified prefix before the branch step. "
        "`outcome` pairs (when asked): a failed and a successful run of the same task that "
        "share every message up to the assistant step where they part."
    ),
    columns={
        "prompt": "the shared messages before the branch step (OpenAI chat format)",
        "chosen": "the accepted continuation: the correction from the branch step, or the "
        "successful run from where the two part",
        "rejected": "the original run from the same step (one step when the correction "
        "regenerated one step, else to the end)",
        "tools": "the tool schemas as JSON text (TRL parses it); null if there were none",
        "task_id": "the task; the train/test split is by task",
        "pair_type": "`correction` or `outcome`",
        "branch_step": "index of the first step after the prompt",
        "chosen_trajectory_id": "the run chosen comes from",
        "rejected_trajectory_id": "the run rejected comes from",
    },
    content=("prompt", "chosen", "rejected", "tools"),
    schema=schema,
    build=build,
    by_task=True,
)
