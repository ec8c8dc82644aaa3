"""Celery tasks. Each takes the id of a database row that records the work, so a task that
runs twice (late acks, redelivery after a lost worker) does no harm."""

from __future__ import annotations

from celery import shared_task

from curation.jobs import IMPORT_TASK, run_import_job


@shared_task(name=IMPORT_TASK)
def import_job(job_id: int) -> str:
    return run_import_job(job_id).status
