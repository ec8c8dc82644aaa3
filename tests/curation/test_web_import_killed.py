"""The web process killed (SIGKILL, gunicorn's master and worker) in the middle of an API
import leaves no half-written trajectory, and posting the same file again completes it with
no duplicates. Queued (`?async=1`), a body cut off by the kill while it is being stored leaves
no job behind, and so does a body cut short by its client going away.
Real processes: gunicorn serving the app on PostgreSQL, fed over HTTP."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import Count, F, QuerySet
from rest_framework.authtoken.models import Token

from curation.jobs import run_import_job
from curation.models import ImportJob, Membership, Project, Trajectory
from tests.curation.helpers import write_runs
from tests.workers.processes import ROOT, database_url, free_port, wait_until

RUNS = 2000
BATCH = 100


class WebProcess:
    """The app under gunicorn (one sync worker) on the test database, as in production."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.spool = folder / "spool"  # where a queued import's body is stored as it is read
        self.spool.mkdir()
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "MEDIA_ROOT": str(settings.MEDIA_ROOT),
            "IMPORT_BATCH_SIZE": str(BATCH),
            "TMPDIR": str(self.spool),
            "VAR_DIR": str(folder / "var"),
            "CELERY_BROKER_URL": "filesystem://",  # queued imports wait in VAR_DIR: no worker
        }
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--workers=1"]
        self.process = subprocess.Popen(
            [*command, f"--bind=127.0.0.1:{self.port}", "--timeout=120", "--log-level=warning"],
            cwd=ROOT,
            env=self.env,
            start_new_session=True,  # its own process group: master and worker die together
        )
        wait_until(self._answers, 30, "gunicorn answering")

    def _answers(self) -> bool:
        assert self.process is not None and self.process.poll() is None, "gunicorn exited"
        client = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            client.request("GET", "/api/projects/")
            return client.getresponse().status == 401
        except OSError:
            return False
        finally:
            client.close()

    def kill(self) -> None:
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None

    def spooled_bytes(self) -> int:
        """Bytes of a body stored so far: the size of the spool files its processes hold open."""
        assert self.process is not None
        total = 0
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if os.getpgid(int(pid)) != self.process.pid:
                    continue
                for fd in os.listdir(f"/proc/{pid}/fd"):
                    if os.readlink(f"/proc/{pid}/fd/{fd}").startswith(str(self.spool)):
                        total += os.stat(f"/proc/{pid}/fd/{fd}").st_size
            except OSError:  # a process or file gone meanwhile
                continue
        return total


@pytest.fixture
def body(tmp_path: Path) -> bytes:
    return write_runs(tmp_path / "runs.jsonl", RUNS)


@pytest.fixture
def token() -> str:
    """A researcher's API token for the project `web`."""
    project = Project.objects.create(slug="web", name="Web")
    user = User.objects.create_user("researcher", password="pw-123456789")
    Membership.objects.create(project=project, user=user, role=Membership.Role.RESEARCHER)
    return Token.objects.create(user=user).key


@pytest.fixture
def web(tmp_path: Path) -> Iterator[WebProcess]:
    web = WebProcess(tmp_path)
    web.start()
    yield web
    web.kill()


def open_import(
    web: WebProcess, token: str, length: int, query: str = ""
) -> http.client.HTTPConnection:
    """A POST to the import endpoint with its headers sent: the body follows with send()."""
    client = http.client.HTTPConnection("127.0.0.1", web.port, timeout=120)
    client.putrequest("POST", f"/api/projects/web/import/{query}")
    client.putheader("Authorization", f"Token {token}")
    client.putheader("Content-Type", "application/x-ndjson")
    client.putheader("Content-Length", str(length))
    client.endheaders()
    return client


def send_half_of_a_queued_import(web: WebProcess, token: str, body: bytes) -> Any:
    """The connection, once the server has started storing the half of `body` it was sent."""
    client = open_import(web, token, len(body), "?async=1")
    client.send(body[: len(body) // 2])
    wait_until(lambda: web.spooled_bytes() > 0, 60, "the body being stored")
    return client


def post_import(web: WebProcess, token: str, body: bytes, query: str = "") -> tuple[int, dict]:
    client = open_import(web, token, len(body), query)
    try:
        client.send(body)
        response = client.getresponse()
        return response.status, json.loads(response.read())
    finally:
        client.close()


def others_gone() -> bool:
    """No database session but this one: the killed process's open transaction rolled back."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid()"
        )
        return cursor.fetchone()[0] == 0


def assert_whole(landed: QuerySet[Trajectory]) -> None:
    assert not landed.annotate(rows=Count("steps")).exclude(rows=F("step_count")).exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_killing_the_web_process_mid_import_leaves_nothing_half_written(
    web: WebProcess, token: str, body: bytes
) -> None:
    landed = Trajectory.objects.filter(project__slug="web")
    cut_off: list[BaseException] = []

    def post_all() -> None:
        try:
            post_import(web, token, body)
        except (OSError, http.client.HTTPException) as exc:
            cut_off.append(exc)

    poster = threading.Thread(target=post_all)
    poster.start()
    wait_until(lambda: landed.count() >= 3 * BATCH, 60, "three batches landed")
    web.kill()
    poster.join(timeout=30)
    assert cut_off, "the import finished before the web process was killed"

    wait_until(others_gone, 30, "the killed process's database session ended")
    assert 3 * BATCH <= landed.count() < RUNS
    assert_whole(landed)

    web.start()
    status, summary = post_import(web, token, body)
    assert status == 200, summary
    assert summary["created"] + summary["duplicates"] == RUNS
    assert summary["duplicates"] >= 3 * BATCH
    assert landed.count() == landed.values("external_id").distinct().count() == RUNS
    assert_whole(landed)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_killing_the_web_process_while_storing_a_queued_import_leaves_no_job(
    web: WebProcess, token: str, body: bytes
) -> None:
    client = send_half_of_a_queued_import(web, token, body)
    web.kill()
    client.close()

    wait_until(others_gone, 30, "the killed process's database session ended")
    assert not ImportJob.objects.exists()
    assert not (settings.MEDIA_ROOT / "imports").exists()

    web.start()
    status, data = post_import(web, token, body, "?async=1")
    assert status == 202, data
    job = ImportJob.objects.get(pk=data["id"])
    assert job.status == ImportJob.Status.QUEUED
    assert job.upload.size == len(body)  # the whole body, stored

    job = run_import_job(job.pk)  # what the worker does with it
    assert job.summary["created"] == RUNS
    landed = Trajectory.objects.filter(project__slug="web")
    assert landed.count() == landed.values("external_id").distinct().count() == RUNS
    assert_whole(landed)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_queued_import_whose_client_went_away_mid_body_stores_nothing(
    web: WebProcess, token: str, body: bytes
) -> None:
    client = send_half_of_a_queued_import(web, token, body)
    client.close()  # the client, or a proxy on the way, went away mid-body
    wait_until(lambda: web.spooled_bytes() == 0, 30, "the request answered")
    assert not ImportJob.objects.exists()
