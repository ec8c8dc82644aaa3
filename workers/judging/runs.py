"""Judging on the database: versions, batches, runs, and storing what judges say.

`start_batch` records what was asked (a batch, one queued run per trajectory) and queues
tasks of `JUDGE_BATCH_SIZE` trajectories; `judge` (the task body) runs the strategy for the
runs that are not done yet and stores each result in one transaction with its annotation,
so a task that runs twice, or again after its worker died, duplicates nothing."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from annotate import effective
from annotate.models import Annotation, StepScore
from curation.models import Step, Trajectory
from workers.backends import Backend, make_backend
from workers.judging.schema import Judgement
from workers.judging.strategies import JudgeSettings, Outcome, run_batch
from workers.models import JudgeBatch, JudgeConfig, JudgeConfigVersion, JudgeRun

JUDGE_TASK = "workers.judge_batch"
Status = JudgeRun.Status
_backends: dict[str, Backend] = {}  # one per backend setup per worker process


def current_version(config: JudgeConfig) -> JudgeConfigVersion:
    """The config's version, a new one when its versioned fields changed since the last."""
    snapshot = json.loads(json.dumps(config.snapshot()))
    version = config.current_version
    if version is not None and version.settings == snapshot:
        return version
    with transaction.atomic():
        latest = config.versions.order_by("-number").first()
        version = JudgeConfigVersion.objects.create(
            config=config, number=(latest.number + 1) if latest else 1, settings=snapshot
        )
        config.current_version = version
        JudgeConfig.objects.filter(pk=config.pk).update(current_version=version)
    return version


def start_batch(
    config: JudgeConfig,
    trajectories: QuerySet[Trajectory],
    user: Any = None,
    reason: str = "asked",
    send: bool = True,
) -> JudgeBatch:
    """Queue the judging of `trajectories` by the config's current version. Trajectories it
    already judged are left as they are; runs that failed before are tried again. With
    `send` false nothing goes to Celery (the caller judges the batch itself)."""
    version = current_version(config)
    with transaction.atomic():
        batch = JudgeBatch.objects.create(version=version, requested_by=user, reason=reason)
        ids = list(trajectories.order_by("id").values_list("id", flat=True))
        JudgeRun.objects.bulk_create(
            [JudgeRun(version=version, trajectory_id=pk, batch=batch) for pk in ids],
            ignore_conflicts=True,
            batch_size=1000,
        )
        todo = JudgeRun.objects.filter(version=version, trajectory_id__in=ids).exclude(
            status=Status.DONE
        )
        todo.update(batch=batch, status=Status.QUEUED, error="")
        pending = list(todo.order_by("trajectory_id").values_list("trajectory_id", flat=True))
        batch.total = len(pending)
        if not pending:
            batch.status = JudgeBatch.Status.DONE
            batch.finished_at = timezone.now()
        batch.save(update_fields=["total", "status", "finished_at"])
        size = settings.JUDGE_BATCH_SIZE
        chunks = [pending[i : i + size] for i in range(0, len(pending), size)]
        if send:
            transaction.on_commit(lambda: _send(config.queue, version.pk, batch.pk, chunks))
    return batch


def _send(queue: str, version_id: int, batch_id: int, chunks: list[list[int]]) -> None:
    for chunk in chunks:
        current_app.send_task(JUDGE_TASK, args=[version_id, chunk, batch_id], queue=queue)


def unjudged(config: JudgeConfig, trajectories: QuerySet[Trajectory]) -> QuerySet[Trajectory]:
    """Those of `trajectories` the config's current version has no run for yet."""
    version = current_version(config)
    return trajectories.exclude(judge_runs__version=version)


def settings_of(version: JudgeConfigVersion) -> JudgeSettings:
    s = version.settings
    return JudgeSettings(
        strategy=s["strategy"],
        score_steps=s["score_steps"],
        rubric=s["prompt_template"],
        taxonomy=[
            e if isinstance(e, dict) else {"name": str(e), "description": ""}
            for e in version.config.project.error_taxonomy
        ],
        temperature=s["temperature"],
        top_p=s["top_p"],
        seed=s["seed"],
        max_tokens=s["max_tokens"],
        token_budget=s["token_budget"],
        max_attempts=max(1, s["max_attempts"]),
        verdict_free=s["backend"] == JudgeConfig.Backend.CRITIC,
    )


def backend_of(version: JudgeConfigVersion) -> Backend:
    s = version.settings
    key = json.dumps([s["backend"], s["model"], s["options"]], sort_keys=True)
    if key not in _backends:
        _backends[key] = make_backend(s["backend"], s["model"], s["options"])
    return _backends[key]


def payloads(ids: Sequence[int]) -> dict[int, dict[str, Any]]:
    """The trajectories as the prompts and the heuristic read them: three queries."""
    trajectories = Trajectory.objects.filter(pk__in=ids).select_related("task", "toolset")
    out: dict[int, dict[str, Any]] = {
        t.pk: {
            "steps": [],
            "tools": t.tools,
            "task": {
                "instruction": t.task.instruction if t.task else "",
                "reference": t.task.reference if t.task else None,
            },
            "outcome": {"success": t.success, "reward": t.reward},
        }
        for t in trajectories
    }
    steps = Step.objects.filter(trajectory_id__in=ids).order_by("trajectory_id", "index")
    for step in steps.values(
        "trajectory_id",
        "index",
        "role",
        "name",
        "content",
        "reasoning",
        "tool_calls",
        "tool_call_id",
    ):
        out[step.pop("trajectory_id")]["steps"].append(step)
    return out


def judge(version_id: int, trajectory_ids: Iterable[int], batch_id: int | None = None) -> dict:
    """Judge those of `trajectory_ids` whose run for this version is not done; store each
    result. Returns counts of done and failed runs."""
    version = JudgeConfigVersion.objects.select_related("config__project").get(pk=version_id)
    ids = sorted(set(trajectory_ids))
    JudgeRun.objects.bulk_create(
        [JudgeRun(version=version, trajectory_id=pk, batch_id=batch_id) for pk in ids],
        ignore_conflicts=True,
    )
    runs = JudgeRun.objects.filter(version=version, trajectory_id__in=ids).exclude(
        status=Status.DONE
    )
    todo = {run.trajectory_id: run for run in runs}
    counts = {"done": 0, "failed": 0, "skipped": len(ids) - len(todo)}
    if todo:
        JudgeRun.objects.filter(pk__in=[r.pk for r in todo.values()]).update(status=Status.RUNNING)
        data = payloads(list(todo))
        order = [pk for pk in ids if pk in data]
        started = time.monotonic()
        outcomes = run_batch(backend_of(version), settings_of(version), [data[pk] for pk in order])
        elapsed = time.monotonic() - started
        for pk, outcome in zip(order, outcomes, strict=True):
            ok = store(version, todo[pk], outcome, elapsed / len(order))
            counts["done" if ok else "failed"] += 1
        effective.refresh(order)
    if batch_id is not None:
        finish_batch(batch_id)
    return counts


def store(version: JudgeConfigVersion, run: JudgeRun, outcome: Outcome, share_s: float) -> bool:
    """Record one run; with a judgement, its annotation and step scores in the same
    transaction. Returns whether the run is done."""
    calls = outcome.calls
    run.calls = calls
    run.prompt_tokens = sum(c["prompt_tokens"] or 0 for c in calls)
    run.completion_tokens = sum(c["completion_tokens"] or 0 for c in calls)
    run.latency_s = sum(c["latency_s"] for c in calls) or share_s
    run.finished_at = timezone.now()
    judgement = outcome.judgement
    with transaction.atomic():
        if judgement is None:
            run.status = Status.FAILED
            run.error = outcome.error
            run.result = None
        else:
            run.status = Status.DONE
            run.error = ""
            run.result = judgement_dict(judgement)
            run.annotation = save_annotation(version, run.trajectory_id, judgement)
        run.save()
    return judgement is not None


def judgement_dict(judgement: Judgement) -> dict[str, Any]:
    data = dict(vars(judgement))
    data["step_labels"] = {str(k): list(v) for k, v in judgement.step_labels.items()}
    return data


def save_annotation(version: JudgeConfigVersion, trajectory_id: int, j: Judgement) -> Annotation:
    source = (
        Annotation.Source.HEURISTIC
        if version.settings["backend"] == JudgeConfig.Backend.HEURISTIC
        else Annotation.Source.JUDGE
    )
    annotation, _ = Annotation.objects.update_or_create(
        trajectory_id=trajectory_id,
        source=source,
        source_name=version.label,
        author=None,
        defaults={
            "verdict": j.verdict,
            "first_critical_step": j.first_critical_step,
            "root_cause_step": j.root_cause_step,
            "responsible_agent": j.responsible_agent,
            "error_category": j.error_category,
            "rationale": j.rationale,
            "confidence": j.confidence,
            "step_labels": {str(k): label for k, (label, _) in sorted(j.step_labels.items())},
            "status": Annotation.Status.SUBMITTED,
        },
    )
    StepScore.objects.filter(trajectory_id=trajectory_id, source_name=version.label).delete()
    StepScore.objects.bulk_create(
        StepScore(
            trajectory_id=trajectory_id,
            step_index=index,
            source=StepScore.Source.JUDGE,
            source_name=version.label,
            label=label,
            score=score,
        )
        for index, (label, score) in sorted(j.step_labels.items())
    )
    return annotation


def finish_batch(batch_id: int) -> None:
    """Mark the batch done once none of its runs is queued or running."""
    open_runs = Q(runs__status__in=[Status.QUEUED, Status.RUNNING])
    batch = JudgeBatch.objects.annotate(open=Count("runs", filter=open_runs)).get(pk=batch_id)
    if batch.open == 0 and batch.status != JudgeBatch.Status.DONE:
        JudgeBatch.objects.filter(pk=batch_id).update(
            status=JudgeBatch.Status.DONE, finished_at=timezone.now()
        )
    elif batch.open and batch.status == JudgeBatch.Status.QUEUED:
        JudgeBatch.objects.filter(pk=batch_id).update(status=JudgeBatch.Status.RUNNING)


def progress(batch: JudgeBatch) -> dict[str, int]:
    """Runs of the batch by status, plus its total."""
    counts = dict(
        JudgeRun.objects.filter(batch=batch)
        .values_list("status")
        .annotate(n=Count("id"))
        .values_list("status", "n")
    )
    return {"total": batch.total, **{s: counts.get(s, 0) for s in Status.values}}
