"""A worker killed (SIGKILL) in the middle of a correction batch loses nothing and duplicates
nothing: every failed run ends with exactly one corrected trajectory. Real processes on
PostgreSQL and Redis."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest

from config.celery import app as celery_app
from curation.models import Project, Trajectory
from tests.annotate.helpers import label_failure, make_trajectory
from tests.workers.judge_server import completion, judge_server
from tests.workers.processes import need_shared_broker, start_worker_process, wait_until
from workers.corrections import runner
from workers.models import Correction, TeacherConfig


def slow_teacher(body: dict) -> tuple[int, object]:
    time.sleep(0.4)
    return completion(json.dumps({"content": "Let me check first.", "tool_calls": []}))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_killing_a_worker_mid_batch_leaves_one_correction_per_run(settings) -> None:
    need_shared_broker()
    celery_app.control.purge()
    settings.JUDGE_BATCH_SIZE = 4
    project = Project.objects.create(slug="killed", name="Killed")
    steps = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "wrong"}]
    for _ in range(8):
        label_failure(make_trajectory(project, steps, success=False), 1)

    with judge_server(slow_teacher) as server:
        teacher = TeacherConfig.objects.create(
            project=project,
            name="t",
            backend="openai",
            model="m",
            options={"base_url": server.base_url, "backoff_s": 0.01, "concurrency": 1},
        )
        batch = runner.start_batch(teacher, project.trajectories.all())
        generated = Correction.objects.filter(batch=batch, status="generated")

        first = start_worker_process()
        try:
            wait_until(lambda: len(server.requests) >= 2, 60, "the first worker correcting")
        finally:
            os.killpg(first.pid, signal.SIGKILL)
            first.wait()
        assert generated.count() < 8

        second = start_worker_process()
        try:
            wait_until(lambda: generated.count() == 8, 120, "all 8 corrections generated")
        finally:
            os.killpg(second.pid, signal.SIGTERM)
            second.wait(timeout=30)

    corrected = Trajectory.objects.filter(project=project, agent_role="correction")
    assert corrected.count() == 8
    assert corrected.values("parent").distinct().count() == 8
    assert Correction.objects.filter(batch=batch).count() == 8
