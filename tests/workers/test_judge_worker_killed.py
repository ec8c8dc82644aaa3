"""A worker killed (SIGKILL) in the middle of a judging batch loses nothing and duplicates
nothing: its unacknowledged task goes to the next worker, which skips the runs already done.
Real processes: two `celery worker`s one after the other, on PostgreSQL and Redis."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from annotate.models import Annotation
from config.celery import app as celery_app
from curation.models import Project
from tests.annotate.helpers import make_trajectory
from tests.workers.judge_server import completion, judge_server
from workers.judging import runs
from workers.models import JudgeBatch, JudgeConfig, JudgeRun

ROOT = Path(__file__).resolve().parents[2]
REPLY = json.dumps(
    {
        "verdict": "failure",
        "first_critical_step": 1,
        "root_cause_step": 1,
        "error_category": "other",
        "responsible_agent": "",
        "rationale": "slow judge",
        "confidence": 50,
    }
)


def slow_reply(body: dict) -> tuple[int, object]:
    time.sleep(0.4)
    return completion(REPLY)


def start_worker_process(batch_size: int) -> subprocess.Popen:
    db = connection.settings_dict
    host, port = db["HOST"] or "127.0.0.1", db["PORT"] or 5432
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{host}:{port}/{db['NAME']}",
        "CELERY_BROKER_URL": celery_app.conf.broker_url,
        # Redis: redeliver a dead worker's task after 3 s, sweeping for such tasks every second
        "CELERY_BROKER_TRANSPORT_OPTIONS": json.dumps(
            {"visibility_timeout": 3, "unacked_restore_interval": 1, "unacked_restore_throttle": 1}
        ),
        "JUDGE_BATCH_SIZE": str(batch_size),
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--concurrency=1",
            "--pool=prefork",
            "-Q",
            "default",
            "--loglevel=WARNING",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,  # its own process group, so the kill takes the pool child too
    )


def wait_until(condition, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} not reached in {seconds}s")


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_killing_a_worker_mid_batch_loses_and_duplicates_nothing() -> None:
    if celery_app.conf.broker_url.startswith("filesystem://"):
        pytest.skip("needs a broker shared with a worker process (Redis, as in CI)")
    celery_app.control.purge()
    project = Project.objects.create(slug="killed", name="Killed")
    steps = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "bye"}]
    for _ in range(8):
        make_trajectory(project, steps, success=False)

    with judge_server(slow_reply) as server:
        config = JudgeConfig.objects.create(
            project=project,
            name="slow",
            backend="openai",
            model="m",
            score_steps=False,
            options={"base_url": server.base_url, "backoff_s": 0.01},
        )
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr("django.conf.settings.JUDGE_BATCH_SIZE", 4)
            batch = runs.start_batch(config, project.trajectories.all())
        done = JudgeRun.objects.filter(version=batch.version, status=JudgeRun.Status.DONE)

        first = start_worker_process(batch_size=4)
        try:
            wait_until(lambda: len(server.requests) >= 2, 60, "the first worker judging")
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        assert done.count() < 8  # it died mid-batch

        second = start_worker_process(batch_size=4)
        try:
            wait_until(lambda: done.count() == 8, 120, "all 8 runs done after the restart")
        finally:
            os.killpg(second.pid, signal.SIGTERM)
            second.wait(timeout=30)

    assert JudgeRun.objects.filter(version=batch.version).count() == 8
    annotations = Annotation.objects.filter(trajectory__project=project, source_name="slow v1")
    assert annotations.count() == 8
    assert annotations.values("trajectory").distinct().count() == 8
    runs.finish_batch(batch.pk)
    batch.refresh_from_db()
    assert batch.status == JudgeBatch.Status.DONE
