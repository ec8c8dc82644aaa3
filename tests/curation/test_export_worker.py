"""Exports queued from the API run on a real Celery worker that listens only on the `export`
queue; a redelivered export is harmless and one a dead worker left running runs again."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from celery.contrib.testing.worker import start_worker
from rest_framework.test import APIClient

from config.celery import app as celery_app
from curation.exports.runner import run_export
from curation.models import DatasetExport
from tests.curation.export_helpers import export, load, member, record, stored


@pytest.fixture
def export_worker() -> Iterator[None]:
    celery_app.control.purge()  # messages other tests queued with no worker running
    with start_worker(celery_app, queues=["export"], perform_ping_check=False, shutdown_timeout=30):
        yield


def wait_for(pk: int, seconds: float = 60) -> DatasetExport:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done = DatasetExport.objects.get(pk=pk)
        if done.status in (DatasetExport.Status.DONE, DatasetExport.Status.FAILED):
            return done
        time.sleep(0.2)
    raise AssertionError(f"export still {done.status} after {seconds}s")


@pytest.mark.django_db(transaction=True)
def test_an_export_worker_runs_an_export_started_over_the_api(project, export_worker):
    load(project, [record(n, f"t{n}", True) for n in range(5)])
    client = APIClient()
    client.force_authenticate(member(project, "researcher"))
    response = client.post(f"/api/projects/{project.slug}/exports/", {"kind": "sft"}, format="json")
    assert response.status_code == 202

    done = wait_for(response.json()["id"])
    assert done.status == DatasetExport.Status.DONE, done.error
    assert done.counts["rows"] == 5
    assert client.get(response.json()["url"]).json()["progress"] == 1.0


@pytest.mark.django_db
def test_a_finished_export_is_left_alone_and_a_stuck_one_runs_again(project):
    load(project, [record(n, f"t{n}", True) for n in range(3)])
    done = export(project, "sft", test_fraction=0)
    before = stored(done)["train.jsonl"].read_bytes()
    assert run_export(done.pk).finished_at == done.finished_at  # redelivered: nothing happens

    DatasetExport.objects.filter(pk=done.pk).update(status=DatasetExport.Status.RUNNING)
    again = run_export(done.pk)
    assert again.status == DatasetExport.Status.DONE
    assert [f["path"] for f in again.files] == [f["path"] for f in done.files]  # same names
    assert stored(again)["train.jsonl"].read_bytes() == before
