"""Celery tasks. Each takes the id of a database row that records the work, so a task that
runs twice (late acks, redelivery after a lost worker) does no harm."""

from __future__ import annotations

from celery import shared_task
from django.db import DatabaseError

from curation.exports.runner import EXPORT_TASK, run_export
from curation.jobs import IMPORT_TASK, run_import_job
from workers import reconcile, schedule, scoring
from workers.corrections import runner as corrections
from workers.critic import jobs as critic_jobs
from workers.judging import runs
from workers.models import JudgeConfig


@shared_task(name=IMPORT_TASK)
def import_job(job_id: int) -> str:
    return run_import_job(job_id).status


@shared_task(
    name=runs.JUDGE_TASK,
    autoretry_for=(DatabaseError,),
    retry_backoff=True,
    max_retries=5,
)
def judge_batch(version_id: int, trajectory_ids: list[int], batch_id: int | None = None) -> dict:
    """Judge up to JUDGE_BATCH_SIZE trajectories; runs already done are skipped."""
    return runs.judge(version_id, trajectory_ids, batch_id)


@shared_task(name="workers.judge_scheduled")
def judge_scheduled(config_id: int) -> int:
    """Periodic: queue the matching trajectories the config has not judged yet."""
    config = JudgeConfig.objects.select_related("project").filter(pk=config_id).first()
    batch = schedule.judge_new(config) if config else None
    return batch.total if batch else 0


@shared_task(
    name=corrections.CORRECT_TASK,
    autoretry_for=(DatabaseError,),
    retry_backoff=True,
    max_retries=5,
)
def correct_batch(correction_ids: list[int]) -> dict:
    """Generate and verify up to JUDGE_BATCH_SIZE corrections; finished ones are skipped."""
    return corrections.correct(correction_ids)


@shared_task(name=scoring.SCORE_TASK, autoretry_for=(DatabaseError,), max_retries=5)
def score_steps(model: str, trajectory_ids: list[int], name: str = "", device: str = "auto") -> int:
    """Reward-model scores for the assistant steps of these trajectories (replaced, not added)."""
    return scoring.score_trajectories(model, trajectory_ids, name, device)


@shared_task(name=EXPORT_TASK)
def export_dataset(export_id: int) -> str:
    """A dataset export (curation/exports/runner.py), sent to the `export` queue."""
    return run_export(export_id).status


@shared_task(
    name=critic_jobs.TRAIN_TASK,
    autoretry_for=(DatabaseError,),
    retry_backoff=True,
    max_retries=3,
)
def train_critic(critic_id: int) -> str:
    """One critic training (a CriticModel row, workers/critic/jobs.py), sent to `gpu`."""
    return critic_jobs.train(critic_id).status


@shared_task(name=critic_jobs.RETRAIN_TASK)
def retrain_critics() -> int:
    """Periodic: train the next critic version of projects with enough new labels."""
    return len(critic_jobs.retrain_due())


@shared_task(name="workers.reconcile")
def reconcile_work() -> dict:
    """Periodic: send again the work a lost message or a dead worker left unfinished."""
    return reconcile.reconcile()
