"""The reconciler: the database records every piece of requested work (imports, judge runs,
corrections, exports) with its status, so work that a lost broker message (Redis keeps nothing
on disk) or a dead worker left unfinished is found here and sent again. Every task skips what
is already done, so sending again is always safe; work still `running` is only sent again once
it is older than `RECONCILE_STALE_S` (it may simply be slow)."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from curation.exports.runner import EXPORT_QUEUE, EXPORT_TASK
from curation.jobs import IMPORT_TASK
from curation.models import DatasetExport, ImportJob
from workers.corrections.runner import CORRECT_TASK
from workers.judging.runs import JUDGE_TASK
from workers.models import Correction, JudgeRun, worker_queue

QUEUED, RUNNING = "queued", "running"


def _cutoffs() -> tuple[datetime, datetime]:
    now = timezone.now()
    return (
        now - timedelta(seconds=settings.RECONCILE_QUEUED_S),
        now - timedelta(seconds=settings.RECONCILE_STALE_S),
    )


def _chunks(ids: list[int]) -> list[list[int]]:
    size = settings.JUDGE_BATCH_SIZE
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def reconcile() -> dict[str, int]:
    """Send again what has waited too long; returns how many of each kind were sent."""
    queued, stale = _cutoffs()
    sent: dict[str, int] = defaultdict(int)

    imports = ImportJob.objects.filter(
        Q(status=QUEUED, created_at__lt=queued) | Q(status=RUNNING, started_at__lt=stale)
    )
    for pk in imports.values_list("pk", flat=True):
        current_app.send_task(IMPORT_TASK, args=[pk])
        sent["imports"] += 1

    exports = DatasetExport.objects.filter(
        Q(status=QUEUED, created_at__lt=queued) | Q(status=RUNNING, created_at__lt=stale)
    )
    for pk in exports.values_list("pk", flat=True):
        current_app.send_task(EXPORT_TASK, args=[pk], queue=EXPORT_QUEUE)
        sent["exports"] += 1

    runs = JudgeRun.objects.filter(  # a run queued again joins a new batch: its time counts
        Q(status=QUEUED, batch__created_at__lt=queued)
        | Q(status=RUNNING, batch__created_at__lt=stale)
    )
    by_batch: dict[tuple[int, int | None, str], list[int]] = defaultdict(list)
    rows = runs.values_list("version_id", "batch_id", "version__config__backend", "trajectory_id")
    for version_id, batch_id, backend, trajectory_id in rows.order_by("trajectory_id"):
        by_batch[(version_id, batch_id, backend)].append(trajectory_id)
    for (version_id, batch_id, backend), ids in by_batch.items():
        for chunk in _chunks(ids):
            current_app.send_task(
                JUDGE_TASK, args=[version_id, chunk, batch_id], queue=worker_queue(backend)
            )
            sent["judge_runs"] += len(chunk)

    corrections = Correction.objects.filter(
        Q(status=QUEUED, created_at__lt=queued) | Q(status=RUNNING, created_at__lt=stale)
    )
    by_queue: dict[str, list[int]] = defaultdict(list)
    for pk, backend in corrections.values_list("pk", "batch__teacher__backend").order_by("pk"):
        by_queue[worker_queue(backend)].append(pk)
    for queue, ids in by_queue.items():
        for chunk in _chunks(ids):
            current_app.send_task(CORRECT_TASK, args=[chunk], queue=queue)
            sent["corrections"] += len(chunk)
    return dict(sent)
