"""The reconciler sends again the work whose broker message was lost (Redis keeps nothing on
disk, so a restart loses every queued task): judge runs, corrections, imports and exports all
finish afterwards on a real worker, each exactly once. Fresh work is left alone."""

from __future__ import annotations

import json

import pytest
from celery.contrib.testing.worker import start_worker

from annotate.models import Annotation
from config.celery import app as celery_app
from curation.models import DatasetExport, ImportJob, Project, Trajectory
from tests.annotate.helpers import make_trajectory
from tests.workers.judge_server import completion, judge_server
from tests.workers.processes import wait_until
from tests.workers.work_requests import STEPS, request_everything
from workers.judging import runs
from workers.models import Correction, JudgeConfig, JudgeRun
from workers.reconcile import reconcile


@pytest.mark.django_db(transaction=True)
def test_work_whose_messages_were_lost_is_sent_again_and_done_once(settings) -> None:
    teacher_reply = json.dumps({"content": "right", "tool_calls": []})
    with judge_server(lambda body: completion(teacher_reply)) as server:
        project = Project.objects.create(slug="lost", name="Lost")
        asked = request_everything(project, server.base_url)
        celery_app.control.purge()  # the broker lost every message, as a Redis restart does

        settings.RECONCILE_QUEUED_S = 0
        sent = reconcile()
        assert sent == {"imports": 1, "exports": 1, "judge_runs": 4, "corrections": 4}

        with start_worker(
            celery_app,
            queues=["default", "gpu", "export"],
            perform_ping_check=False,
            shutdown_timeout=30,
        ):
            judged = JudgeRun.objects.filter(batch=asked["judged"], status="done")
            wait_until(lambda: judged.count() == 4, 60, "judge runs done")
            corrected = Correction.objects.filter(batch=asked["corrected"], status="generated")
            wait_until(lambda: corrected.count() == 4, 60, "corrections made")
            wait_until(
                lambda: ImportJob.objects.get(pk=asked["job"].pk).status == "done", 60, "import"
            )
            wait_until(
                lambda: DatasetExport.objects.get(pk=asked["export"].pk).status == "done",
                60,
                "export",
            )

    assert Trajectory.objects.filter(project=project, agent_role="correction").count() == 4
    assert Trajectory.objects.filter(project=project, external_id__startswith="new-").count() == 3
    assert (
        Annotation.objects.filter(trajectory__project=project, source="heuristic").count()
        == 4  # the lost batch, once
    )


@pytest.mark.django_db
def test_fresh_work_is_left_alone(project) -> None:
    make_trajectory(project, STEPS, success=False)
    runs.start_batch(
        JudgeConfig.objects.get(project=project, name="heuristic"),
        project.trajectories.all(),
        send=False,
    )
    assert reconcile() == {}
