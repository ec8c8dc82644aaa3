"""Work of every kind, requested through the same code as the pages and the API, for the
tests that lose its broker messages: four judge runs, four corrections, an import of three
records and an export."""

from __future__ import annotations

import json

from django.core.files.base import ContentFile

from curation.exports.runner import check_request, create_export, enqueue_export
from curation.jobs import enqueue_import
from curation.models import ImportJob, Project
from tests.annotate.helpers import label_failure, make_trajectory
from workers.corrections import runner
from workers.judging import runs
from workers.models import JudgeConfig, TeacherConfig

STEPS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "wrong"}]
LINES = "\n".join(
    json.dumps({"id": f"new-{n}", "task": {"id": "t"}, "steps": STEPS}) for n in range(3)
).encode()


def request_everything(project: Project, base_url: str) -> dict:
    for _ in range(4):
        label_failure(make_trajectory(project, STEPS, success=False), 1)
    judged = runs.start_batch(
        JudgeConfig.objects.get(project=project, name="heuristic"), project.trajectories.all()
    )
    teacher = TeacherConfig.objects.create(
        project=project, name="t", backend="openai", model="m", options={"base_url": base_url}
    )
    corrected = runner.start_batch(teacher, project.trajectories.all())
    job = ImportJob.objects.create(
        project=project, upload=ContentFile(LINES, name="new.jsonl"), original_name="new.jsonl"
    )
    enqueue_import(job)
    export = create_export(project, check_request(project, "rl_prefix", "jsonl", {}), "jsonl", None)
    enqueue_export(export)
    return {"judged": judged, "corrected": corrected, "job": job, "export": export}
