"""A tiny randomly initialised model (built here, no download) behind the `transformers`
backend: grammar-constrained decoding makes every reply valid, so the pipeline stores a judge
annotation and a teacher's correction whatever the random weights say."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotate.models import Annotation
from curation.models import Project
from tests.annotate.helpers import label_failure, make_trajectory
from tests.workers.tiny_model import build_tiny_model
from workers.corrections import runner
from workers.judging import runs
from workers.models import JudgeConfig, JudgeRun, TeacherConfig

STEPS = [
    {"role": "user", "content": "What is 2 + 2?"},
    {"role": "assistant", "content": "5"},
    {"role": "user", "content": "Sure?"},
    {"role": "assistant", "content": "Yes, 5."},
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny"))


@pytest.mark.django_db
def test_a_tiny_local_judge_writes_schema_valid_annotations(project: Project, tiny_model) -> None:
    trajectories = [make_trajectory(project, STEPS, success=False) for _ in range(3)]
    config = JudgeConfig.objects.create(
        project=project,
        name="tiny",
        backend="transformers",
        model=str(tiny_model),
        options={"device": "cpu"},
        max_tokens=1200,
        token_budget=2000,
        max_attempts=1,
        score_steps=True,
        seed=7,
    )
    batch = runs.start_batch(config, project.trajectories.all(), send=False)
    runs.judge(batch.version_id, [t.pk for t in trajectories], batch.pk)

    done = JudgeRun.objects.filter(status=JudgeRun.Status.DONE)
    assert done.count() == 3, list(JudgeRun.objects.values_list("error", flat=True))
    for annotation in Annotation.objects.filter(source="judge", source_name="tiny v1"):
        assert annotation.verdict in ("success", "partial", "failure")
        step = annotation.first_critical_step
        assert step is None or 0 <= step < len(STEPS)
        assert 0 <= annotation.confidence <= 1
    assert config.queue == "gpu"


@pytest.mark.django_db
def test_a_tiny_local_teacher_rewrites_the_critical_step(project: Project, tiny_model) -> None:
    trajectory = make_trajectory(project, STEPS, success=False)
    label_failure(trajectory, 1)
    teacher = TeacherConfig.objects.create(
        project=project,
        name="tiny",
        backend="transformers",
        model=str(tiny_model),
        options={"device": "cpu"},
        max_tokens=1500,
        max_attempts=2,
        seed=3,
    )
    batch = runner.start_batch(teacher, project.trajectories.all(), send=False)
    runner.correct(batch.corrections.values_list("pk", flat=True))

    correction = batch.corrections.get()
    assert correction.status == "generated", correction.error
    corrected = correction.result
    assert list(corrected.steps.filter(index__lt=1).values_list("content", flat=True)) == [
        "What is 2 + 2?"
    ]
    new = corrected.steps.get(index=1)
    assert new.role == "assistant" and new.tool_calls == []  # no tools: the schema allows none
