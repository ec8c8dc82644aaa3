"""Corrections on the database: requesting a batch (one Correction row per failed trajectory
that has a first critical step; the others are skipped with the reason), generating in a
worker, storing the corrected run as a new Trajectory (prefix copied as recorded), and
verifying it with a judge. A correction whose result exists is never generated again, so a
redelivered task duplicates nothing."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable
from typing import Any

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import Count, QuerySet
from django.utils import timezone

from annotate import effective
from annotate.models import Annotation, EffectiveLabel
from curation.models import Step, Trajectory
from workers.backends import Backend, make_backend
from workers.corrections import environments
from workers.corrections.environments import Environment, HttpEnvironment, Replay
from workers.corrections.rollout import Plan, Result, Sampling, Session, run_batch
from workers.judging import runs
from workers.models import Correction, CorrectionBatch, JudgeConfig, TeacherConfig

CORRECT_TASK = "workers.correct_batch"
Status = Correction.Status
_backends: dict[str, Backend] = {}


def start_batch(
    teacher: TeacherConfig,
    trajectories: QuerySet[Trajectory],
    *,
    mode: str = "step",
    environment: str = "replay",
    guidance: bool = False,
    max_steps: int = 20,
    verifier: JudgeConfig | None = None,
    reflector: TeacherConfig | None = None,
    simulator: TeacherConfig | None = None,
    user: Any = None,
    send: bool = True,
) -> CorrectionBatch:
    """Record the request and queue it. Trajectories without a first critical step in their
    effective label are skipped, each with the reason."""
    environments.validate_name(environment)
    rows = list(
        trajectories.order_by("id").values_list("id", "effective_label__first_critical_step")
    )
    with transaction.atomic():
        batch = CorrectionBatch.objects.create(
            project=teacher.project,
            teacher=teacher,
            mode=mode,
            environment=environment,
            guidance=guidance,
            reflector=reflector,
            simulator=simulator,
            verifier=verifier,
            max_steps=max_steps,
            requested_by=user,
        )
        snapshot = teacher.snapshot()
        corrections = []
        for pk, step in rows:
            if step is None:
                batch.skipped.append(
                    {"trajectory": pk, "reason": "its effective label names no first critical step"}
                )
                continue
            corrections.append(
                Correction(
                    batch=batch, source_id=pk, intervention_step=step, teacher_settings=snapshot
                )
            )
        Correction.objects.bulk_create(corrections, batch_size=1000)
        batch.total = len(corrections)
        if not corrections:
            batch.status = CorrectionBatch.Status.DONE
            batch.finished_at = timezone.now()
        batch.save()
        ids = list(batch.corrections.order_by("id").values_list("id", flat=True))
        size = settings.JUDGE_BATCH_SIZE
        chunks = [ids[i : i + size] for i in range(0, len(ids), size)]
        if send:
            transaction.on_commit(
                lambda: [
                    current_app.send_task(CORRECT_TASK, args=[chunk], queue=teacher.queue)
                    for chunk in chunks
                ]
            )
    return batch


def _backend(config: TeacherConfig) -> Backend:
    key = json.dumps([config.backend, config.model, config.options], sort_keys=True)
    if key not in _backends:
        _backends[key] = make_backend(config.backend, config.model, config.options)
    return _backends[key]


def _sampling(config: TeacherConfig, settings_: dict | None = None) -> Sampling:
    s = settings_ or config.snapshot()
    return Sampling(
        temperature=s["temperature"],
        top_p=s["top_p"],
        seed=s["seed"],
        max_tokens=s["max_tokens"],
        max_attempts=max(1, s["max_attempts"]),
        instruction=s["prompt_template"],
    )


def _environment(name: str, steps: list[dict]) -> Environment | None:
    if name == "replay":
        return Replay(steps)
    if name == "simulated":
        return None
    if name.startswith("python:"):
        return environments.load_python(name[len("python:") :])
    return HttpEnvironment(name)


def _labels(trajectory_ids: list[int]) -> dict[int, dict[str, Any]]:
    """The effective label's category and a rationale given for its critical step, for each
    trajectory (what the reflector reads): two queries whatever the count."""
    labels = {
        pk: {"error_category": category, "rationale": "", "step": step}
        for pk, category, step in EffectiveLabel.objects.filter(
            trajectory_id__in=trajectory_ids
        ).values_list("trajectory_id", "error_category", "first_critical_step")
    }
    notes = Annotation.objects.filter(trajectory_id__in=trajectory_ids).exclude(rationale="")
    for pk, step, rationale in notes.order_by("id").values_list(
        "trajectory_id", "first_critical_step", "rationale"
    ):
        label = labels.get(pk)
        if label is not None and label["step"] == step and not label["rationale"]:
            label["rationale"] = rationale
    return labels


def correct(correction_ids: Iterable[int]) -> dict[str, int]:
    """Generate and verify these corrections; the finished ones are left alone."""
    corrections = list(
        Correction.objects.filter(pk__in=list(correction_ids))
        .exclude(status__in=Correction.FINISHED)
        .select_related("batch__teacher", "batch__reflector", "batch__simulator", "batch__verifier")
        .order_by("id")
    )
    counts = {"generated": 0, "failed": 0}
    to_generate = [c for c in corrections if c.result_id is None]
    if to_generate:
        Correction.objects.filter(pk__in=[c.pk for c in to_generate]).update(status=Status.RUNNING)
        data = runs.payloads([c.source_id for c in to_generate])
        batch = to_generate[0].batch
        teacher = batch.teacher
        backends = {
            "teacher": _backend(teacher),
            "reflector": _backend(batch.reflector or teacher),
            "simulator": _backend(batch.simulator or teacher),
        }
        sampling = {
            "teacher": _sampling(teacher, to_generate[0].teacher_settings),
            "reflector": _sampling(batch.reflector or teacher),
            "simulator": _sampling(batch.simulator or teacher),
        }
        labels = _labels([c.source_id for c in to_generate])
        sessions = []
        for c in to_generate:
            trajectory = data[c.source_id]
            plan = Plan(
                trajectory=trajectory,
                branch_step=c.intervention_step,
                label=labels.get(c.source_id, {}),
                mode=batch.mode,
                guidance=batch.guidance,
                max_steps=batch.max_steps,
                environment=_environment(batch.environment, trajectory["steps"]),
                call_prefix=f"fix{c.pk}",
            )
            sessions.append(Session(plan, sampling))
        started = time.monotonic()
        results = run_batch(backends, sessions)
        share = (time.monotonic() - started) / len(to_generate)
        for c, result in zip(to_generate, results, strict=True):
            ok = store(c, result, share)
            counts["generated" if ok else "failed"] += 1
    generated = Correction.objects.filter(
        pk__in=[c.pk for c in corrections], status=Status.GENERATED, batch__verifier__isnull=False
    ).select_related("batch__verifier")
    by_verifier: dict[int, list[Correction]] = {}
    for c in generated:
        by_verifier.setdefault(c.batch.verifier_id, []).append(c)
    for group in by_verifier.values():
        verify(group)
    for batch_id in {c.batch_id for c in corrections}:
        finish_batch(batch_id)
    return counts


def store(correction: Correction, result: Result, share_s: float) -> bool:
    calls = result.calls
    correction.calls = calls
    correction.guidance = result.guidance
    correction.stop_reason = result.stop_reason[:300]
    correction.prompt_tokens = sum(c["prompt_tokens"] or 0 for c in calls)
    correction.completion_tokens = sum(c["completion_tokens"] or 0 for c in calls)
    correction.latency_s = sum(c["latency_s"] for c in calls) or share_s
    correction.finished_at = timezone.now()
    if result.error or not result.steps:
        correction.status = Status.FAILED
        correction.error = result.error or "the teacher wrote no step"
        correction.save()
        return False
    with transaction.atomic():
        locked = Correction.objects.select_for_update().get(pk=correction.pk)
        if locked.result_id is not None:  # a task sent again stored it first
            return True
        correction.result = copy_with_new_steps(correction, result.steps)
        correction.status = Status.GENERATED
        correction.error = ""
        correction.save()
    effective.refresh([correction.result_id])
    return True


def copy_with_new_steps(correction: Correction, new_steps: list[dict]) -> Trajectory:
    """A new trajectory: the source's steps before the branch, copied as recorded, then the
    teacher's. It shares the source's task and tool schemas."""
    source = Trajectory.objects.get(pk=correction.source_id)
    k = correction.intervention_step
    prefix = list(source.steps.filter(index__lt=k).order_by("index"))
    digest = hashlib.sha256(
        json.dumps([correction.pk, source.content_hash, new_steps], sort_keys=True).encode()
    ).hexdigest()
    trajectory = Trajectory.objects.create(
        project_id=source.project_id,
        task_id=source.task_id,
        external_id=f"{source.external_id or source.pk}-fix{correction.pk}",
        agent_model=correction.teacher_settings.get("model", ""),
        agent_role=Trajectory.AgentRole.CORRECTION,
        source_format="correction",
        toolset_id=source.toolset_id,
        metadata={"correction": correction.pk, "mode": correction.batch.mode},
        step_count=k + len(new_steps),
        content_hash=digest,
        parent=source,
        branch_step=k,
    )
    copied = [
        Step(
            trajectory=trajectory,
            index=step.index,
            role=step.role,
            name=step.name,
            content=step.content,
            reasoning=step.reasoning,
            tool_calls=step.tool_calls,
            tool_call_id=step.tool_call_id,
            metadata=step.metadata,
        )
        for step in prefix
    ]
    written = [
        Step(
            trajectory=trajectory,
            index=k + n,
            role=step["role"],
            name=step.get("name") or "",
            content=step.get("content") or "",
            tool_calls=step.get("tool_calls") or [],
            tool_call_id=step.get("tool_call_id") or "",
            metadata={"written_by": "teacher" if step["role"] == "assistant" else "environment"},
        )
        for n, step in enumerate(new_steps)
    ]
    Step.objects.bulk_create(copied + written)
    return trajectory


def verify(corrections: list[Correction]) -> None:
    """Judge the corrected runs with their batch's verifier, in one batched judging, and
    accept or reject each: mode step is accepted when the judge finds no critical error at or
    after the branch step, mode rollout when it judges the run a success."""
    version = runs.current_version(corrections[0].batch.verifier)
    runs.judge(version.pk, [c.result_id for c in corrections])
    judged = {
        run.trajectory_id: run
        for run in version.runs.filter(
            trajectory_id__in=[c.result_id for c in corrections]
        ).select_related("annotation")
    }
    for correction in corrections:
        decide(correction, version.label, judged.get(correction.result_id))


def decide(correction: Correction, judge: str, run: Any) -> None:
    if run is None or run.annotation is None:
        correction.reason = f"verification failed: {run.error if run else 'no run'}"
        correction.save(update_fields=["reason"])
        return
    annotation = run.annotation
    k = correction.intervention_step
    if correction.batch.mode == CorrectionBatch.Mode.ROLLOUT:
        accepted = annotation.verdict == Annotation.Verdict.SUCCESS
    else:
        step = annotation.first_critical_step
        accepted = annotation.verdict == Annotation.Verdict.SUCCESS or step is None or step < k
    correction.status = Status.ACCEPTED if accepted else Status.REJECTED
    step = annotation.first_critical_step
    where = "" if step is None else f" (step {step})"
    correction.reason = f"{judge}: {annotation.verdict}{where}. {annotation.rationale}"[:2000]
    correction.save(update_fields=["status", "reason"])


def override(correction: Correction, accepted: bool, user: Any, note: str) -> None:
    """A reviewer's decision, which stands over the verifier's."""
    correction.status = Status.ACCEPTED if accepted else Status.REJECTED
    correction.overridden_by = user
    correction.reason = f"set by {user.get_username()}: {note}".strip()
    correction.save(update_fields=["status", "overridden_by", "reason"])


def finish_batch(batch_id: int) -> None:
    open_ = Correction.objects.filter(
        batch_id=batch_id, status__in=[Status.QUEUED, Status.RUNNING]
    ).exists()
    update = (
        {"status": CorrectionBatch.Status.RUNNING}
        if open_
        else {
            "status": CorrectionBatch.Status.DONE,
            "finished_at": timezone.now(),
        }
    )
    CorrectionBatch.objects.filter(pk=batch_id).exclude(status=CorrectionBatch.Status.DONE).update(
        **update
    )


def progress(batch: CorrectionBatch) -> dict[str, int]:
    counts = dict(
        batch.corrections.values_list("status").annotate(n=Count("id")).values_list("status", "n")
    )
    return {
        "total": batch.total,
        "skipped": len(batch.skipped),
        **{s: counts.get(s, 0) for s in Status.values},
    }
