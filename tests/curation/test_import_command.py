"""The import_trajectories command: layouts, --json summary, exit codes, overrides, --format."""

from __future__ import annotations

import gzip
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import Count

from annotate.models import Annotation
from curation.models import Project, Step, Task, Trajectory
from tests.curation.helpers import run_import as run

pytestmark = pytest.mark.django_db


def record(n: int, **extra) -> dict:
    return {
        "id": f"run-{n}",
        "task": {"id": f"task-{n % 2}", "instruction": f"Do thing {n % 2}"},
        "steps": [
            {"role": "user", "content": f"question {n}"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "name": "look", "arguments": {"n": n}}],
            },
            {"role": "tool", "tool_call_id": "c1", "name": "look", "content": "found"},
            {"role": "assistant", "content": f"answer {n}"},
        ],
        **extra,
    }


def jsonl(*records) -> bytes:
    return b"\n".join(json.dumps(r).encode() for r in records) + b"\n"


def assert_steps_complete() -> None:
    for trajectory in Trajectory.objects.annotate(n=Count("steps")):
        assert trajectory.step_count == trajectory.n


def test_json_prints_one_summary_and_exits_zero(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(jsonl(record(1), record(2), record(3)))
    code, summary = run(path, project="fresh")
    assert code == 0
    assert summary == {
        "project": "fresh",
        "created": 3,
        "duplicates": 0,
        "failed": 0,
        "steps": 12,
        "tasks_created": 2,
        "annotations": 0,
        "errors": [],
    }
    project = Project.objects.get(slug="fresh")
    assert project.trajectories.count() == 3
    assert Step.objects.filter(trajectory__project=project).count() == 12
    trajectory = Trajectory.objects.get(external_id="run-1")
    assert trajectory.source_format == "canonical"
    assert trajectory.task.external_id == "task-1"
    steps = list(trajectory.steps.order_by("index"))
    assert [s.index for s in steps] == [0, 1, 2, 3]
    assert steps[1].tool_calls == [{"id": "c1", "name": "look", "arguments": {"n": 1}}]
    assert steps[2].tool_call_id == "c1" and steps[2].name == "look"
    assert_steps_complete()


def test_human_readable_output_without_json(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(jsonl(record(1)))
    out = io.StringIO()
    call_command("import_trajectories", str(path), project="demo", stdout=out)
    assert "Imported 1 trajectories (4 steps" in out.getvalue()


def test_any_failed_record_exits_one_and_the_rest_land(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(jsonl(record(1), {"steps": []}, record(3)))
    code, summary = run(path)
    assert code == 1
    assert (summary["created"], summary["failed"]) == (2, 1)
    assert summary["errors"] == [
        {
            "source": str(path),
            "location": "line 2",
            "error": "steps: a trajectory needs at least one step",
        }
    ]
    assert Trajectory.objects.count() == 2


def test_a_second_import_reports_duplicates_and_creates_nothing(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(jsonl(record(1), record(2)))
    run(path)
    code, summary = run(path)
    assert code == 0
    assert (summary["created"], summary["duplicates"], summary["steps"]) == (0, 2, 0)
    assert Trajectory.objects.count() == 2
    assert Step.objects.count() == 8


def test_duplicates_within_one_file_are_stored_once(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(jsonl(record(1), record(1), record(2)))
    code, summary = run(path)
    assert (code, summary["created"], summary["duplicates"]) == (0, 2, 1)


def test_the_same_file_in_another_project_is_imported_again(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(jsonl(record(1)))
    run(path, project="one")
    _, summary = run(path, project="two")
    assert summary["created"] == 1
    assert Task.objects.filter(external_id="task-1").count() == 2


def test_agent_model_and_role_overrides(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(jsonl(record(1, agent={"model": "gpt-4o", "role": "student"}), record(2)))
    code, summary = run(path, agent_model="claude-x", agent_role="teacher")
    assert (code, summary["created"]) == (0, 2)
    assert set(Trajectory.objects.values_list("agent_model", "agent_role")) == {
        ("claude-x", "teacher")
    }


def test_without_overrides_the_record_agent_is_kept(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(jsonl(record(1, agent={"model": "gpt-4o", "role": "teacher"}), record(2)))
    run(path)
    assert dict(Trajectory.objects.values_list("external_id", "agent_model")) == {
        "run-1": "gpt-4o",
        "run-2": "",
    }
    assert Trajectory.objects.get(external_id="run-2").agent_role == "student"


def test_it_reads_folders_jsonl_json_arrays_single_documents_and_gzip(tmp_path):
    folder = tmp_path / "mixed"
    (folder / "deeper").mkdir(parents=True)
    (folder / "a.jsonl").write_bytes(jsonl(record(1), record(2)))
    (folder / "b.json").write_text(json.dumps([record(3), record(4)], indent=2))
    (folder / "deeper" / "c.json").write_text(json.dumps(record(5), indent=2))
    with gzip.open(folder / "d.jsonl.gz", "wb") as out:
        out.write(jsonl(record(6), record(7)))
    with gzip.open(folder / "e.json.gz", "wb") as out:
        out.write(json.dumps([record(8)]).encode())
    (folder / "README.md").write_text("not data")
    code, summary = run(folder)
    assert (code, summary["created"], summary["failed"]) == (0, 8, 0)
    assert sorted(Trajectory.objects.values_list("external_id", flat=True)) == [
        f"run-{n}" for n in range(1, 9)
    ]
    assert_steps_complete()


def test_several_paths_in_one_run(tmp_path):
    one = tmp_path / "one.jsonl"
    two = tmp_path / "two.json"
    one.write_bytes(jsonl(record(1)))
    two.write_text(json.dumps([record(2)]))
    code, summary = run(one, two)
    assert (code, summary["created"]) == (0, 2)


def test_every_format_is_detected_in_one_file(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(
        jsonl(
            record(1),
            {"id": "oa", "messages": [{"role": "user", "content": "hi"}]},
            {"id": "sg", "conversations": [{"from": "human", "value": "hi"}]},
            {"task_id": 4, "reward": 1.0, "trial": 0, "traj": [{"role": "user", "content": "x"}]},
            {
                "question": "q?",
                "history": [{"role": "human", "content": "q?"}, {"role": "Agent", "content": "a"}],
                "mistake_agent": "Agent",
                "mistake_step": "1",
                "mistake_reason": "wrong",
            },
        )
    )
    code, summary = run(path)
    assert (code, summary["created"], summary["annotations"]) == (0, 5, 1)
    assert sorted(Trajectory.objects.values_list("source_format", flat=True)) == [
        "canonical",
        "openai",
        "sharegpt",
        "tau_bench",
        "who_and_when",
    ]


def test_format_option_skips_detection(tmp_path):
    path = tmp_path / "chats.jsonl"
    both = {
        "id": "both",
        "messages": [{"role": "user", "content": "from messages"}],
        "conversations": [{"from": "human", "value": "from conversations"}],
    }
    path.write_bytes(jsonl(both))
    code, summary = run(path, format="sharegpt")
    assert (code, summary["created"]) == (0, 1)
    trajectory = Trajectory.objects.get()
    assert trajectory.source_format == "sharegpt"
    assert trajectory.steps.get().content == "from conversations"


def test_format_option_reports_records_of_another_shape(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(jsonl(record(1)))
    code, summary = run(path, format="openai")
    assert (code, summary["created"], summary["failed"]) == (1, 0, 1)
    (error,) = summary["errors"]
    assert error["location"] == "line 1"
    assert error["error"].startswith("messages: is missing")


def test_an_unknown_format_name_is_refused(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(jsonl(record(1)))
    with pytest.raises(CommandError, match="invalid choice: 'yaml'"):
        call_command("import_trajectories", str(path), "--project=demo", "--format=yaml")
    assert not Trajectory.objects.exists()


def test_an_unknown_format_name_given_from_code_fails_every_record(tmp_path):
    # call_command(format=...) bypasses argparse's choices: the records say why they failed.
    path = tmp_path / "runs.jsonl"
    path.write_bytes(jsonl(record(1), record(2)))
    code, summary = run(path, format="yaml")
    assert (code, summary["created"], summary["failed"]) == (1, 0, 2)
    assert summary["errors"][0]["error"].startswith("unknown format 'yaml'")
    assert not Trajectory.objects.exists()


def test_a_folder_without_data_files_is_an_error(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing")
    with pytest.raises(CommandError, match="no .json"):
        call_command("import_trajectories", str(tmp_path), project="demo")


def test_gold_labels_become_annotations_in_the_same_import(tmp_path):
    path = tmp_path / "runs.jsonl"
    labels = {
        "verdict": "failure",
        "first_critical_step": 1,
        "category": "wrong_tool",
        "rationale": "looked up the wrong thing",
        "agent": "solver",
        "confidence": 0.75,
    }
    path.write_bytes(jsonl(record(1, labels=labels)))
    code, summary = run(path)
    assert (code, summary["annotations"]) == (0, 1)
    annotation = Annotation.objects.get()
    assert annotation.source == Annotation.Source.GOLD
    assert annotation.source_name == "gold"
    assert annotation.trajectory.external_id == "run-1"
    assert (annotation.verdict, annotation.first_critical_step) == ("failure", 1)
    assert annotation.error_category == "wrong_tool"
    assert annotation.responsible_agent == "solver"
    assert annotation.rationale == "looked up the wrong thing"
    assert annotation.confidence == 0.75


def test_batch_size_option_gives_the_same_result(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(jsonl(*[record(n) for n in range(25)]))
    code, summary = run(path, batch_size=4)
    assert (code, summary["created"], summary["steps"]) == (0, 25, 100)
    assert_steps_complete()
