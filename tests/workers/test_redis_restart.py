"""A real Redis restart with work queued loses nothing and duplicates nothing. Redis keeps
nothing on disk (no snapshot, no append-only file, as in production), so the restart empties
every queue; the reconciler, run by beat inside a real worker, finds the work in the database
and sends it again. The Redis is a private `redis-server` on a port of its own, so restarting
it disturbs nothing else; the work is requested by a child process whose broker it is."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from annotate.models import Annotation
from curation.models import DatasetExport, ImportJob, Trajectory
from tests.workers.judge_server import completion, judge_server
from tests.workers.processes import ROOT, database_url, free_port, wait_until
from workers.models import Correction, JudgeRun

QUEUES = ("default", "gpu", "export")
TEACHER_REPLY = json.dumps({"content": "right", "tool_calls": []})
# Run in a child process: judge runs, corrections, an import and an export, through the
# same code as the pages and the API; it prints the rows that record them.
REQUEST_WORK = """
import json, sys
import django
django.setup()
from curation.models import Project
from tests.workers.work_requests import request_everything
project = Project.objects.create(slug="restart", name="Restart")
asked = request_everything(project, sys.argv[1])
print(json.dumps({"project": project.pk, **{name: row.pk for name, row in asked.items()}}))
"""


class PrivateRedis:
    """A redis-server of this test's own on a free loopback port, keeping nothing on disk."""

    def __init__(self, executable: str, folder: Path) -> None:
        port = free_port()
        self.command = [executable, "--bind", "127.0.0.1", "--port", str(port)]
        self.command += ["--save", "", "--appendonly", "no", "--dir", str(folder)]
        self.url = f"redis://127.0.0.1:{port}/0"
        self.process: subprocess.Popen | None = None

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)

    def _answers(self) -> bool:
        try:
            return bool(self.client().ping())
        except redis.ConnectionError:
            return False

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL)
        wait_until(self._answers, 10, "redis-server answering")

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None


def request_work(broker_url: str, teacher_url: str) -> dict[str, int]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": broker_url,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-c", REQUEST_WORK, teacher_url],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def reconcile_due_at_first_beat() -> None:
    """Beat last ran the reconciler one period (settings.CELERY_BEAT_SCHEDULE) ago, so a
    worker's beat sends it at once rather than a period after it starts."""
    entry = settings.CELERY_BEAT_SCHEDULE["reconcile"]
    period, _ = IntervalSchedule.objects.get_or_create(
        every=int(entry["schedule"]), period=IntervalSchedule.SECONDS
    )
    PeriodicTask.objects.create(
        name="reconcile",
        task=entry["task"],
        interval=period,
        last_run_at=timezone.now() - timedelta(seconds=entry["schedule"]),
    )


def start_worker_with_beat(broker_url: str) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "CELERY_BROKER_URL": broker_url,
        "MEDIA_ROOT": str(settings.MEDIA_ROOT),
        "RECONCILE_QUEUED_S": "0",  # production waits 5 minutes before sending queued work again
    }
    command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--beat"]
    return subprocess.Popen(
        [*command, "--concurrency=1", "-Q", ",".join(QUEUES), "--loglevel=WARNING"],
        cwd=ROOT,
        env=env,
        start_new_session=True,  # its own process group: beat and the pool child stop with it
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_work_queued_when_redis_restarts_is_sent_again_and_done_once(tmp_path) -> None:
    executable = shutil.which("redis-server")
    if executable is None:
        pytest.skip("needs redis-server to start a Redis of the test's own")
    broker = PrivateRedis(executable, tmp_path)
    broker.start()
    try:
        with judge_server(lambda body: completion(TEACHER_REPLY)) as teacher:
            asked = request_work(broker.url, teacher.base_url)
            queued = {queue: broker.client().llen(queue) for queue in QUEUES}
            assert queued == {"default": 3, "gpu": 0, "export": 1}  # judge, correct, import

            broker.kill()
            broker.start()
            assert broker.client().dbsize() == 0  # every message is gone

            reconcile_due_at_first_beat()
            worker = start_worker_with_beat(broker.url)
            try:
                wait_until(lambda: finished(asked), 60, "all the work done after the restart")
            finally:
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(timeout=30)
    finally:
        broker.kill()

    project = asked["project"]
    assert JudgeRun.objects.filter(trajectory__project=project).count() == 4
    heuristic = Annotation.objects.filter(trajectory__project=project, source="heuristic")
    assert heuristic.count() == heuristic.values("trajectory").distinct().count() == 4
    assert Correction.objects.filter(batch__project=project).count() == 4
    corrected = Trajectory.objects.filter(project=project, agent_role="correction")
    assert corrected.count() == corrected.values("parent").distinct().count() == 4
    assert len(teacher.requests) == 4  # one teacher call per correction: none made twice
    imported = Trajectory.objects.filter(project=project, external_id__startswith="new-")
    assert imported.count() == imported.values("external_id").distinct().count() == 3
    assert ImportJob.objects.get(pk=asked["job"]).summary["created"] == 3
    export = DatasetExport.objects.get(pk=asked["export"])
    assert export.processed == export.total


def finished(asked: dict[str, int]) -> bool:
    return (
        JudgeRun.objects.filter(batch=asked["judged"], status="done").count() == 4
        and Correction.objects.filter(batch=asked["corrected"], status="generated").count() == 4
        and ImportJob.objects.get(pk=asked["job"]).status == "done"
        and DatasetExport.objects.get(pk=asked["export"]).status == "done"
    )
