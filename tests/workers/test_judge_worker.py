"""Judging on a real Celery worker (a worker thread on the configured broker: Redis in CI),
and scheduled judging: a config's periodic task judges what its version has not judged."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from celery.contrib.testing.worker import start_worker
from django_celery_beat.models import PeriodicTask

from annotate.models import Annotation
from config.celery import app as celery_app
from curation.models import Project
from tests.annotate.helpers import make_trajectory
from workers.judging import runs
from workers.models import JudgeBatch, JudgeConfig, JudgeRun
from workers.tasks import judge_scheduled

STEPS = [
    {"role": "user", "content": "Cancel my booking"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "a", "name": "cancel_reservation", "arguments": {"id": "R1"}}],
    },
    {"role": "tool", "content": "cancelled", "tool_call_id": "a"},
    {"role": "assistant", "content": "Done."},
]


@pytest.fixture
def worker() -> Iterator[None]:
    celery_app.control.purge()
    with start_worker(
        celery_app, perform_ping_check=False, shutdown_timeout=30, queues=["default", "gpu"]
    ):
        yield


def wait_for(batch: JudgeBatch, seconds: float = 60) -> JudgeBatch:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        batch.refresh_from_db()
        if batch.status == JudgeBatch.Status.DONE:
            return batch
        time.sleep(0.2)
    raise AssertionError(f"batch still {batch.status} after {seconds}s: {runs.progress(batch)}")


def heuristic(project: Project) -> JudgeConfig:
    return JudgeConfig.objects.get(project=project, name="heuristic")


@pytest.mark.django_db(transaction=True)
def test_a_worker_judges_a_queued_batch_in_chunks(worker, settings) -> None:
    settings.JUDGE_BATCH_SIZE = 3
    project = Project.objects.create(slug="judged", name="Judged")
    for _ in range(7):
        make_trajectory(project, STEPS, success=False)

    batch = runs.start_batch(heuristic(project), project.trajectories.all())
    wait_for(batch)

    assert runs.progress(batch) | {"total": 7} == {
        "total": 7,
        "queued": 0,
        "running": 0,
        "done": 7,
        "failed": 0,
    }
    annotations = Annotation.objects.filter(trajectory__project=project, source="heuristic")
    assert annotations.count() == 7
    assert set(annotations.values_list("verdict", flat=True)) == {"failure"}


@pytest.mark.django_db
def test_every_new_project_has_the_heuristic_judge_on_a_schedule() -> None:
    project = Project.objects.create(slug="fresh", name="Fresh")
    config = heuristic(project)
    task = PeriodicTask.objects.get(task="workers.judge_scheduled", args=json.dumps([config.pk]))
    assert task.interval.every == config.schedule_minutes and task.enabled

    config.schedule_minutes = None
    config.save()
    assert not PeriodicTask.objects.filter(args=json.dumps([config.pk])).exists()


@pytest.mark.django_db(transaction=True)
def test_a_scheduled_round_judges_new_imports_only(worker) -> None:
    project = Project.objects.create(slug="sched", name="Scheduled")
    config = heuristic(project)
    make_trajectory(project, STEPS, success=False)

    assert judge_scheduled(config.pk) == 1
    wait_for(JudgeBatch.objects.get(version__config=config))
    assert judge_scheduled(config.pk) == 0  # nothing new: no batch

    make_trajectory(project, STEPS, success=True)
    make_trajectory(project, STEPS, success=True)
    assert judge_scheduled(config.pk) == 2
    wait_for(JudgeBatch.objects.filter(version__config=config).first())
    assert JudgeRun.objects.filter(version__config=config, status="done").count() == 3


@pytest.mark.django_db
def test_a_scheduled_config_with_a_filter_judges_only_what_matches() -> None:
    project = Project.objects.create(slug="filtered", name="Filtered")
    config = heuristic(project)
    config.filter = {"outcome": "failure"}
    config.save()
    make_trajectory(project, STEPS, success=False)
    make_trajectory(project, STEPS, success=True)

    assert judge_scheduled(config.pk) == 1
