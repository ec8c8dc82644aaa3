"""Imports that run on a worker: queue a job row, hand its id to Celery, run it idempotently."""

from __future__ import annotations

from pathlib import Path

from celery import current_app
from django.db import transaction
from django.utils import timezone

from curation.formats.reading import decompressed, iter_stream
from curation.ingest import Overrides, import_items
from curation.models import ImportJob

IMPORT_TASK = "workers.import_job"  # by name: curation does not import workers


def enqueue_import(job: ImportJob) -> None:
    """Send the job to a worker once the transaction that created it has committed."""
    transaction.on_commit(lambda: current_app.send_task(IMPORT_TASK, args=[job.pk]))


def run_import_job(job_id: int) -> ImportJob:
    """Run one import job. Done or failed jobs are left alone, so a redelivery is harmless;
    a job left `running` by a dead worker runs again (the import itself is idempotent)."""
    job = ImportJob.objects.select_related("project").get(pk=job_id)
    if job.status in (ImportJob.Status.DONE, ImportJob.Status.FAILED):
        return job
    job.status = ImportJob.Status.RUNNING
    job.started_at = timezone.now()
    job.bytes_total = job.upload.size
    job.save(update_fields=["status", "started_at", "bytes_total"])
    try:
        with job.upload.open("rb") as raw:
            stream = decompressed(Path(job.upload.name), raw)
            summary = import_items(
                job.project,
                iter_stream(stream, job.original_name),
                format_name=job.format_name or None,
                overrides=Overrides(job.agent_model, job.agent_role),
                after_batch=lambda _: ImportJob.objects.filter(pk=job.pk).update(
                    bytes_done=raw.tell()
                ),
            )
    except Exception as exc:  # the job row must say what happened, whatever it was
        job.status = ImportJob.Status.FAILED
        job.error = f"{type(exc).__name__}: {exc}"
    else:
        job.status = ImportJob.Status.DONE
        job.summary = {"project": job.project.slug, **summary.as_dict()}
        job.bytes_done = job.bytes_total
    job.finished_at = timezone.now()
    job.save(update_fields=["status", "error", "summary", "bytes_done", "finished_at"])
    return job
