"""Broken input of every kind: a clear error naming file, line or item and field; the bad record
leaves nothing behind, the good records of the same file still land, and no trajectory is ever
left without its steps."""

from __future__ import annotations

import io
import json

import pytest
from django.db.models import Count

from annotate.models import Annotation
from curation.formats.reading import RawItem, iter_stream
from curation.ingest import import_items
from curation.models import Step, Task, Trajectory
from tests.curation.helpers import run_import as run

pytestmark = pytest.mark.django_db


def good(name: str) -> dict:
    return {
        "id": name,
        "task": {"id": f"task-{name}"},
        "steps": [
            {"role": "user", "content": f"hello from {name}"},
            {"role": "assistant", "content": "hi"},
        ],
        "labels": {"verdict": "failure", "first_critical_step": 1},
    }


def assert_database_consistent() -> None:
    """Every trajectory has all its steps; nothing dangles."""
    for trajectory in Trajectory.objects.annotate(n=Count("steps")):
        assert trajectory.step_count == trajectory.n, trajectory.external_id
        indexes = list(trajectory.steps.order_by("index").values_list("index", flat=True))
        assert indexes == list(range(trajectory.n))
    assert not Task.objects.filter(trajectories__isnull=True).exists()


def imported_ids() -> list[str]:
    return sorted(Trajectory.objects.values_list("external_id", flat=True))


def with_step(**step) -> dict:
    record = good("bad")
    record["steps"] = [*record["steps"], step]
    return record


# (the broken line as written, --format if needed, what the error must say)
BROKEN_LINES = {
    "broken_json": (b'{"id": "bad", "steps": [{"role": "user", ', None, "invalid JSON"),
    "missing_steps": (
        json.dumps({"id": "bad", "task": {"id": "t"}}),
        "canonical",
        "steps: is missing",
    ),
    "undetectable_without_steps": (
        json.dumps({"id": "bad", "task": {"id": "t"}}),
        None,
        "cannot tell the format from its keys (id, task)",
    ),
    "empty_steps": (
        json.dumps({"id": "bad", "steps": []}),
        None,
        "steps: a trajectory needs at least one step",
    ),
    "steps_not_a_list": (
        json.dumps({"id": "bad", "steps": {"role": "user", "content": "x"}}),
        None,
        "steps: expected a list, got dict",
    ),
    "step_not_an_object": (
        json.dumps({"id": "bad", "steps": [{"role": "user", "content": "x"}, "hello"]}),
        None,
        "steps[1]: expected an object, got str",
    ),
    "content_a_dict": (
        json.dumps(with_step(role="assistant", content={"text": "x"})),
        None,
        "steps[2].content: expected a string, got dict",
    ),
    "tool_calls_not_a_list": (
        json.dumps(with_step(role="assistant", content="", tool_calls={"name": "f"})),
        None,
        "steps[2].tool_calls: expected a list",
    ),
    "tool_call_without_a_name": (
        json.dumps(with_step(role="assistant", tool_calls=[{"id": "c", "arguments": {}}])),
        None,
        "steps[2].tool_calls[0].name: is missing",
    ),
    "reward_a_string": (
        json.dumps({**good("bad"), "outcome": {"reward": "1.0"}}),
        None,
        "outcome.reward: expected a number, got '1.0'",
    ),
    "success_a_string": (
        json.dumps({**good("bad"), "outcome": {"success": "yes"}}),
        None,
        "outcome.success: expected true, false or null",
    ),
    "unknown_role": (
        json.dumps(with_step(role="robot", content="beep")),
        None,
        "steps[2].role: expected one of system, user, assistant, tool, got 'robot'",
    ),
    "label_step_out_of_range": (
        json.dumps({**good("bad"), "labels": {"first_critical_step": 2}}),
        None,
        "labels.first_critical_step: step 2 is outside the trajectory (0..1)",
    ),
    "label_step_not_a_number": (
        json.dumps({**good("bad"), "labels": [{"root_cause_step": "two"}, {}]}),
        None,
        "labels[0].root_cause_step: expected a step index, got 'two'",
    ),
    "unknown_verdict": (
        json.dumps({**good("bad"), "labels": {"verdict": "meh"}}),
        None,
        "labels.verdict: expected one of success, partial, failure",
    ),
    "unknown_agent_role": (
        json.dumps({**good("bad"), "agent": {"role": "boss"}}),
        None,
        "agent.role: expected one of teacher, student, correction",
    ),
    "nul_character_in_content": (
        json.dumps(with_step(role="assistant", content="a\x00b")),
        None,
        "steps[2].content: contains a NUL character",
    ),
    "nul_character_in_metadata_key": (
        json.dumps({**good("bad"), "metadata": {"k\x00": 1}}),
        None,
        "metadata: contains a NUL character",
    ),
    "raw_nul_byte": (
        b'{"id": "bad", "steps": [{"role": "user", "content": "a\x00"}]}',
        None,
        "invalid JSON: unexpected control character in string",
    ),
    "lone_surrogate": (
        b'{"id": "bad", "steps": [{"role": "user", "content": "cut emoji \\ud83d"}]}',
        None,
        "invalid JSON: no low surrogate in string",
    ),
    "invalid_utf8": (
        b'{"id": "bad", "steps": [{"role": "user", "content": "caf\xe9"}]}',
        None,
        "not valid UTF-8",
    ),
    "non_object_record": (b'["not", "a", "record"]', None, "a record must be a JSON object"),
    "a_bare_number": (b"42", None, "a record must be a JSON object, got int"),
    "unknown_format": (
        json.dumps({"id": "bad", "turns": [{"speaker": "a", "text": "b"}]}),
        None,
        "cannot tell the format from its keys (id, turns)",
    ),
    "openai_agent_a_string": (
        json.dumps({"messages": [{"role": "user", "content": "x"}], "agent": "gpt-4o"}),
        None,
        "agent: expected an object, got str",
    ),
    "openai_messages_not_a_list": (
        json.dumps({"messages": "hello"}),
        None,
        "messages: expected a list, got str",
    ),
    "sharegpt_unknown_speaker": (
        json.dumps({"conversations": [{"from": "alien", "value": "x"}]}),
        None,
        "conversations[0].from: unknown speaker 'alien'",
    ),
    "tau_bench_reward_a_string": (
        json.dumps({"task_id": 1, "reward": "1", "traj": [{"role": "user", "content": "x"}]}),
        None,
        "reward: expected a number, got '1'",
    ),
    "who_and_when_message_without_role": (
        json.dumps({"question": "q", "history": [{"content": "x"}], "mistake_step": "0"}),
        None,
        "history[0].role: is missing",
    ),
    "who_and_when_mistake_step_out_of_range": (
        json.dumps(
            {"question": "q", "history": [{"role": "human", "content": "x"}], "mistake_step": "3"}
        ),
        None,
        "labels.first_critical_step: step 3 is outside the trajectory (0..0)",
    ),
}


@pytest.mark.parametrize("case", sorted(BROKEN_LINES))
def test_a_broken_record_is_reported_by_file_line_and_field_and_the_rest_land(tmp_path, case):
    broken, format_name, message = BROKEN_LINES[case]
    broken = broken if isinstance(broken, bytes) else broken.encode()
    lines = [json.dumps(good("first")).encode(), broken, json.dumps(good("third")).encode()]
    path = tmp_path / f"{case}.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")

    code, summary = run(path, **({"format": format_name} if format_name else {}))

    assert code == 1
    assert (summary["created"], summary["failed"]) == (2, 1)
    (error,) = summary["errors"]
    assert error["source"] == str(path)
    assert error["location"] == "line 2"
    assert message in error["error"]
    assert imported_ids() == ["first", "third"]
    assert Annotation.objects.count() == 2
    assert_database_consistent()


def test_a_broken_first_line_is_reported_and_the_later_lines_land(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_bytes(b'{"steps": [\n' + json.dumps(good("second")).encode() + b"\n")
    code, summary = run(path)
    assert (code, summary["created"], summary["failed"]) == (1, 1, 1)
    assert summary["errors"][0]["location"] == "line 1"
    assert imported_ids() == ["second"]


def test_a_broken_json_array_keeps_the_items_before_it(tmp_path):
    path = tmp_path / "runs.json"
    items = ",\n".join(json.dumps(good(n)) for n in ("a", "b"))
    path.write_text(f'[\n{items},\n{{"id": "c", "steps": [}},\n{json.dumps(good("d"))}\n]')
    code, summary = run(path)
    assert (code, summary["created"], summary["failed"]) == (1, 2, 1)
    (error,) = summary["errors"]
    assert (error["source"], error["location"]) == (str(path), "item 2")
    assert "invalid JSON, reading stopped" in error["error"]
    assert imported_ids() == ["a", "b"]
    assert_database_consistent()


def test_a_bad_item_in_a_json_array_is_reported_by_item_and_field(tmp_path):
    path = tmp_path / "runs.json"
    bad = {"id": "x", "steps": [{"role": "user", "content": "x"}, {"role": "bot"}]}
    path.write_text(json.dumps([good("a"), bad, good("c")]))
    code, summary = run(path)
    assert (code, summary["created"]) == (1, 2)
    (error,) = summary["errors"]
    assert error["location"] == "item 1"
    assert error["error"].startswith("steps[1].role:")


def test_a_broken_single_document_is_one_error_naming_file_and_line(tmp_path):
    good_file = tmp_path / "6.json"
    good_file.write_text(json.dumps(good("six"), indent=2))
    path = tmp_path / "7.json"
    path.write_text('{\n  "question": "q",\n  "history": [\n    {"role": "human",}\n  ]\n}\n')
    code, summary = run(tmp_path)
    assert (code, summary["created"], summary["failed"]) == (1, 1, 1)
    (error,) = summary["errors"]
    assert (error["source"], error["location"]) == (str(path), "line 4")
    assert error["error"].startswith("invalid JSON")
    assert imported_ids() == ["six"]


def test_a_missing_path_is_reported_and_the_other_paths_land(tmp_path):
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(good("a")) + "\n")
    missing = tmp_path / "nope" / "runs.jsonl"
    code, summary = run(missing, path)
    assert (code, summary["created"], summary["failed"]) == (1, 1, 1)
    assert summary["errors"] == [
        {"source": str(missing), "location": "", "error": "no such file or folder"}
    ]
    assert imported_ids() == ["a"]


def test_only_missing_paths_fail_cleanly(tmp_path):
    code, summary = run(tmp_path / "nothing.jsonl")
    assert (code, summary["created"], summary["failed"]) == (1, 0, 1)
    assert not Trajectory.objects.exists()


def raw_items(*objs) -> list[RawItem]:
    return [RawItem("batch.jsonl", f"line {n}", obj) for n, obj in enumerate(objs, 1)]


def test_a_database_refusal_inside_a_batch_is_isolated_to_that_record(project):
    # Two gold labels by the same annotator pass validation but break the one-annotation-
    # per-named-source constraint when stored: the database refuses only that record.
    twice = good("twice")
    twice["labels"] = [
        {"verdict": "failure", "annotator": "gold"},
        {"verdict": "success", "annotator": "gold"},
    ]
    summary = import_items(project, raw_items(good("a"), twice, good("c")), batch_size=10)
    assert (summary.created, summary.failed, summary.annotations) == (2, 1, 2)
    (error,) = summary.errors
    assert error["location"] == "line 2"
    assert error["error"].startswith("the database refused it")
    assert imported_ids() == ["a", "c"]
    assert not Annotation.objects.filter(trajectory__external_id="twice").exists()
    assert not Task.objects.filter(external_id="task-twice").exists()
    assert summary.steps == Step.objects.count() == 4
    assert_database_consistent()


def test_nan_which_no_database_stores_is_refused_as_invalid_json(project):
    # Python's json would accept NaN; neither SQLite's JSON check nor PostgreSQL's jsonb does,
    # so the reader (strict JSON) refuses it with the line, before anything is written.
    lines = [
        json.dumps(good("a")),
        '{"id": "nan", "steps": [{"role": "user", "content": "x", "metadata": {"score": NaN}}]}',
        json.dumps(good("c")),
        '{"id": "nan2", "steps": [{"role": "user", "content": "y"}], "outcome": {"reward": NaN}}',
        json.dumps(good("e")),
    ]
    items = iter_stream(io.BytesIO("\n".join(lines).encode()), "batch.jsonl")
    summary = import_items(project, items, batch_size=10)
    assert (summary.created, summary.failed) == (3, 2)
    assert [e["location"] for e in summary.errors] == ["line 2", "line 4"]
    assert all(e["error"].startswith("invalid JSON") for e in summary.errors)
    assert imported_ids() == ["a", "c", "e"]
    assert_database_consistent()


def test_later_batches_still_land_after_a_refused_batch(project):
    twice = good("twice")
    twice["labels"] = [{"annotator": "gold"}, {"annotator": "gold"}]
    records = [good(f"r{n:02}") for n in range(7)]
    records.insert(3, twice)
    summary = import_items(project, raw_items(*records), batch_size=3)
    assert (summary.created, summary.failed) == (7, 1)
    assert imported_ids() == [f"r{n:02}" for n in range(7)]
    assert_database_consistent()


@pytest.mark.postgres
def test_a_step_name_too_long_for_postgresql_is_isolated_to_that_record(project):
    long_name = good("long")
    long_name["steps"][1]["name"] = "agent_" + "x" * 300  # Step.name is varchar(255)
    summary = import_items(project, raw_items(good("a"), long_name, good("c")), batch_size=10)
    assert (summary.created, summary.failed) == (2, 1)
    assert summary.errors[0]["location"] == "line 2"
    assert "the database refused it" in summary.errors[0]["error"]
    assert imported_ids() == ["a", "c"]
    assert_database_consistent()
