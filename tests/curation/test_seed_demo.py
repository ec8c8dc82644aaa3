from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from annotate.models import Annotation
from curation.canonical import validate
from curation.demo import MIN_STEPS, PROJECT_NAME, demo_records
from curation.models import Project, Step, Task, Trajectory
from curation.taxonomy import default_error_taxonomy


def seed(*args: str) -> str:
    out = StringIO()
    call_command("seed_demo", *args, stdout=out)
    return out.getvalue()


def counts() -> tuple[int, int, int, int]:
    return (
        Trajectory.objects.count(),
        Step.objects.count(),
        Task.objects.count(),
        Annotation.objects.count(),
    )


def test_it_creates_the_demo_project(db):
    output = seed()

    project = Project.objects.get(slug="demo")
    assert project.name == PROJECT_NAME
    assert project.error_taxonomy == default_error_taxonomy()
    assert project.trajectories.count() == 60
    assert "Created project 'demo'" in output
    assert "Seeded 60 trajectories" in output


def test_it_seeds_successes_and_failures(db):
    seed("--count", "40")

    runs = Trajectory.objects.filter(project__slug="demo")
    assert set(runs.values_list("success", flat=True)) == {True, False}
    assert set(runs.values_list("reward", flat=True)) == {1.0, 0.0}
    assert set(runs.values_list("agent_model", "agent_role")) == {
        ("gpt-4o", "teacher"),
        ("qwen2.5-7b-instruct", "student"),
    }
    assert runs.values("task").distinct().count() == 10  # four runs per task


def test_it_seeds_tool_calls_and_tool_errors(db):
    seed("--count", "40")

    calls = Step.objects.filter(role="assistant").exclude(tool_calls=[])
    assert calls.exists()
    call = calls.first()
    result = Step.objects.get(trajectory=call.trajectory, index=call.index + 1)
    assert result.role == "tool"
    assert result.tool_call_id == call.tool_calls[0]["id"]
    assert isinstance(call.tool_calls[0]["arguments"], dict)
    assert Step.objects.filter(role="tool", content__startswith='{"error"').exists()


def test_gold_labels_point_at_the_assistant_step_that_failed(db):
    seed()

    gold = Annotation.objects.filter(source=Annotation.Source.GOLD).select_related(
        "trajectory__project"
    )
    assert gold.count() > 0
    for label in gold:
        step = Step.objects.get(trajectory=label.trajectory, index=label.first_critical_step)
        assert step.role == "assistant"
        assert label.verdict == "failure"
        assert label.trajectory.success is False
        assert label.error_category in label.trajectory.project.categories
        assert label.root_cause_step <= label.first_critical_step
        assert label.rationale


def test_running_it_twice_creates_nothing_new(db):
    seed()
    before = counts()

    output = seed()

    assert counts() == before
    assert "already exists" in output
    assert "Seeded 0 trajectories" in output
    assert "60 already present" in output


def test_a_larger_count_adds_only_the_new_runs(db):
    seed("--count", "20")

    output = seed("--count", "28")

    assert "Seeded 8 trajectories" in output
    assert Trajectory.objects.count() == 28


def test_generated_records_all_validate():
    for data in demo_records(200, seed=7):
        record = validate(data)
        for labels in record.labels:
            assert record.steps[labels.first_critical_step].role == "assistant"
        for before, step in zip(record.steps, record.steps[1:], strict=False):
            if step.role == "tool":
                assert step.tool_call_id == before.tool_calls[0].id


def test_the_generator_is_deterministic_for_a_seed():
    assert list(demo_records(12, seed=3)) == list(demo_records(12, seed=3))
    assert list(demo_records(12, seed=3)) != list(demo_records(12, seed=4))
    assert list(demo_records(12))[:5] == list(demo_records(5))


def test_it_makes_runs_of_the_asked_length():
    assert {len(r["steps"]) for r in demo_records(40, steps=(25, 25))} == {25}
    assert {len(r["steps"]) for r in demo_records(40, steps=(MIN_STEPS, MIN_STEPS))} == {MIN_STEPS}
    assert all(30 <= len(r["steps"]) <= 40 for r in demo_records(40, steps=(30, 40)))
    with pytest.raises(ValueError, match="steps must be"):
        list(demo_records(1, steps=(MIN_STEPS - 1, 30)))
