"""A worker killed (SIGKILL) in the middle of a judging batch loses nothing and duplicates
nothing: its unacknowledged task goes to the next worker, which skips the runs already done.
Real processes: two `celery worker`s one after the other, on PostgreSQL and Redis."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from annotate.models import Annotation
from config.celery import app as celery_app
from curation.models import Project
from tests.annotate.helpers import make_trajectory
from tests.workers.judge_server import completion, judge_server
from tests.workers.processes import need_shared_broker, start_worker_process, wait_until
from workers.judging import runs
from workers.models import JudgeBatch, JudgeConfig, JudgeRun

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


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_killing_a_worker_mid_batch_loses_and_duplicates_nothing(settings) -> None:
    need_shared_broker()
    celery_app.control.purge()
    settings.JUDGE_BATCH_SIZE = 4
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
        batch = runs.start_batch(config, project.trajectories.all())
        done = JudgeRun.objects.filter(version=batch.version, status=JudgeRun.Status.DONE)

        first = start_worker_process()
        try:
            wait_until(lambda: len(server.requests) >= 2, 60, "the first worker judging")
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        assert done.count() < 8  # it died mid-batch

        second = start_worker_process()
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
