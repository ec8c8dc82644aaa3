"""Imports queued for a worker: a real Celery worker on the configured broker runs them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from celery.contrib.testing.worker import start_worker
from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from rest_framework.test import APIClient

from config.celery import app as celery_app
from curation.jobs import run_import_job
from curation.models import ImportJob, Membership, Project, Step, Trajectory


def lines(count: int, broken: int | None = None) -> bytes:
    out = []
    for n in range(count):
        if n == broken:
            out.append("{broken")
            continue
        out.append(
            json.dumps(
                {
                    "id": f"run-{n}",
                    "task": {"id": f"t{n % 4}"},
                    "steps": [
                        {"role": "user", "content": f"hello {n}"},
                        {"role": "assistant", "content": "hi"},
                    ],
                }
            )
        )
    return "\n".join(out).encode()


@pytest.fixture
def worker() -> Iterator[None]:
    """A real worker thread on the configured broker, started on an empty queue."""
    celery_app.control.purge()  # messages other tests queued with no worker running
    with start_worker(
        celery_app, queues=["default"], perform_ping_check=False, shutdown_timeout=30
    ):
        yield


def wait_for(job: ImportJob, seconds: float = 60) -> ImportJob:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        job.refresh_from_db()
        if job.status in (ImportJob.Status.DONE, ImportJob.Status.FAILED):
            return job
        time.sleep(0.2)
    raise AssertionError(f"job still {job.status} after {seconds}s")


@pytest.mark.django_db(transaction=True)
def test_a_worker_runs_an_import_queued_over_the_api(worker: None) -> None:
    project = Project.objects.create(slug="queued", name="Queued")
    user = User.objects.create_user("rita", password="pw")
    Membership.objects.create(project=project, user=user, role=Membership.Role.RESEARCHER)
    client = APIClient()
    client.force_authenticate(user)

    response = client.post(
        f"/api/projects/{project.slug}/import/?async=1",
        data=lines(30, broken=7),
        content_type="application/x-ndjson",
    )
    assert response.status_code == 202, response.content
    job = wait_for(ImportJob.objects.get(pk=response.json()["id"]))

    assert job.status == ImportJob.Status.DONE, job.error
    assert job.summary["created"] == 29
    assert job.summary["failed"] == 1
    assert job.summary["errors"][0]["location"] == "line 8"
    assert Trajectory.objects.filter(project=project).count() == 29
    status = client.get(response.json()["url"]).json()
    assert (status["status"], status["progress"]) == ("done", 1.0)


def queued_job(project: Project, body: bytes) -> ImportJob:
    return ImportJob.objects.create(
        project=project, upload=ContentFile(body, name="runs.jsonl"), original_name="runs.jsonl"
    )


def test_running_a_job_twice_imports_once(project: Project) -> None:
    job = queued_job(project, lines(10))
    assert run_import_job(job.pk).status == ImportJob.Status.DONE
    assert run_import_job(job.pk).summary["created"] == 10  # left alone the second time
    assert Trajectory.objects.filter(project=project).count() == 10


def test_a_job_a_dead_worker_left_running_runs_again_without_duplicates(
    project: Project,
) -> None:
    job = queued_job(project, lines(10))
    run_import_job(job.pk)
    ImportJob.objects.filter(pk=job.pk).update(status=ImportJob.Status.RUNNING)

    again = run_import_job(job.pk)
    assert again.status == ImportJob.Status.DONE
    assert again.summary["duplicates"] == 10 and again.summary["created"] == 0
    assert Trajectory.objects.filter(project=project).count() == 10
    assert Step.objects.filter(trajectory__project=project).count() == 20
