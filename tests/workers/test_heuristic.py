"""The heuristic judge backend: its signals, verdicts and step labels on small trajectories,
its error results, and its replies on the real runs in ../shared/data."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from curation.formats import to_record
from curation.taxonomy import DEFAULT_ERROR_TAXONOMY
from workers.backends import GenerationRequest, make_backend
from workers.backends.heuristic import HeuristicBackend
from workers.judging.schema import (
    STEP_LABELS,
    judgement_schema,
    parse,
    step_scores_schema,
)

CATEGORIES = [name for name, _ in DEFAULT_ERROR_TAXONOMY]


def context(
    steps: list[dict[str, Any]],
    outcome: dict[str, Any] | None = None,
    question: str = "judge",
    categories: list[str] | None = None,
    with_steps: bool = False,
) -> dict[str, Any]:
    return {
        "question": question,
        "categories": CATEGORIES if categories is None else categories,
        "with_steps": with_steps,
        "trajectory": {
            "steps": [{"index": i, **step} for i, step in enumerate(steps)],
            "tools": [],
            "task": {"instruction": "help the user", "reference": None},
            "outcome": outcome or {"success": None, "reward": None},
        },
    }


def run(ctx: dict[str, Any]) -> dict[str, Any]:
    """The backend's reply to one context, parsed with the schema the pipeline uses."""
    [result] = HeuristicBackend().generate([GenerationRequest(messages=[], context=ctx)])
    assert result.ok, result.error
    steps = ctx["trajectory"]["steps"]
    if ctx["question"] == "step_scores":
        return parse(result.text, step_scores_schema(len(steps)))
    return parse(result.text, judgement_schema(len(steps), ctx["categories"], ctx["with_steps"]))


def call(name: str, arguments: Any, call_id: str = "c1") -> dict[str, Any]:
    return {"role": "assistant", "content": "", "tool_calls": [
        {"id": call_id, "name": name, "arguments": arguments}
    ]}  # fmt: skip


def result(content: str, call_id: str = "c1") -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def say(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def test_make_backend_builds_the_heuristic():
    backend = make_backend("heuristic")
    assert isinstance(backend, HeuristicBackend)
    assert (backend.kind, backend.model) == ("heuristic", "heuristic")
    backend.close()


def test_an_ignored_tool_error_fails_the_run_at_the_step_that_ignored_it():
    steps = [
        user("Please book HAT001 for me."),
        call("search_flights", {"flight": "HAT001"}),
        result("Error: flight HAT001 not available on date 2024-05-13"),
        say("All set, your trip is confirmed. Have a nice flight!"),
    ]
    reply = run(context(steps))
    assert reply["verdict"] == "failure"  # no outcome, but a strong signal
    assert reply["first_critical_step"] == 3
    assert reply["root_cause_step"] == 1  # the call whose result was the error
    assert reply["error_category"] == "ignored_tool_output_or_error"
    assert reply["responsible_agent"] == ""
    assert "step 2" in reply["rationale"] and "step 3" in reply["rationale"]
    assert "ignored_tool_output_or_error" in reply["rationale"]


@pytest.mark.parametrize(
    "answer",
    [
        "Sorry, that flight is not available on that date.",
        "HAT001 has no seats that day; shall I search HAT002?",  # speaks of what it said
    ],
)
def test_an_acknowledged_error_is_no_signal(answer):
    steps = [
        user("Please book HAT001."),
        call("search_flights", {"flight": "HAT001"}),
        result("Error: flight HAT001 not available"),
        say(answer),
    ]
    reply = run(context(steps, {"success": True, "reward": 1.0}))
    assert reply["verdict"] == "success"
    assert reply["first_critical_step"] is None
    assert reply["error_category"] == ""


@pytest.mark.parametrize(
    "content",
    [
        "Traceback (most recent call last):\n  File 'x.py'\nKeyError: 'id'",
        '{"error": "user not found"}',
        "HTTP 503 Service Unavailable",
        "exitcode: 1 (execution failed)\nCode output: oops",
    ],
)
def test_tool_errors_are_recognised(content):
    steps = [user("go"), call("get_user", {"id": "u1"}), result(content), say("Done: 42.")]
    reply = run(context(steps))
    assert reply["error_category"] == "ignored_tool_output_or_error"


def test_an_exit_code_of_zero_is_no_error_whatever_the_output_says():
    steps = [
        user("go"),
        call("run_code", {"code": "print(x)"}),
        result("exitcode: 0 (execution succeeded)\nCode output: Error: 3 rows skipped"),
        say("The answer is 42."),
    ]
    assert run(context(steps))["verdict"] == "success"


def test_repeated_identical_call_is_a_weak_loop_signal():
    steps = [
        user("What is on my reservation?"),
        call("get_reservation", {"id": "R1", "full": True}, "c1"),
        result('{"id": "R1"}', "c1"),
        call("get_reservation", '{"full": true, "id": "R1"}', "c2"),  # same call, as text
        result('{"id": "R1"}', "c2"),
        say("Your reservation R1 is for one passenger."),
    ]
    reply = run(context(steps, {"success": True, "reward": 1.0}))
    assert reply["verdict"] == "partial"  # success outcome, but a signal fired
    assert reply["first_critical_step"] == 3
    assert reply["root_cause_step"] == 1
    assert reply["error_category"] == "repeated_action_loop"
    # weak: with no outcome it is still only partial
    assert run(context(steps))["verdict"] == "partial"


def test_reading_again_after_new_input_is_no_repeat_but_retrying_a_failed_call_is():
    read = [
        user("What is on my reservation?"),
        call("get_reservation", {"id": "R1"}, "c1"),
        result('{"id": "R1"}', "c1"),
        say("One passenger."),
        user("And the flights?"),
        call("get_reservation", {"id": "R1"}, "c2"),
        result('{"id": "R1"}', "c2"),
        say("Flight HAT001."),
    ]
    assert run(context(read))["verdict"] == "success"
    retry = [
        user("Cancel R1, please."),
        say("Shall I cancel R1?"),
        user("Yes."),
        call("cancel_reservation", {"id": "R1"}, "c1"),
        result("Error: reservation R1 cannot be cancelled", "c1"),
        say("Sorry, it cannot be cancelled."),
        user("Please try again, yes."),
        call("cancel_reservation", {"id": "R1"}, "c2"),
        result("Error: reservation R1 cannot be cancelled", "c2"),
        say("Sorry, it still cannot be cancelled."),
    ]
    reply = run(context(retry))
    assert (reply["first_critical_step"], reply["error_category"]) == (7, "repeated_action_loop")
    assert "had failed" in reply["rationale"]


def test_the_same_message_three_times_is_a_loop():
    steps = [user("Find the answer.")]
    for _ in range(3):
        steps += [say("Let me look that up."), user("ok")]
    steps.append(say("It is 7."))
    reply = run(context(steps, {"success": False, "reward": 0.0}))
    assert reply["verdict"] == "failure"
    assert (reply["first_critical_step"], reply["error_category"]) == (3, "repeated_action_loop")
    assert reply["root_cause_step"] == 1


def test_an_a_b_a_b_alternation_is_a_loop():
    steps = [user("Find the answer.")]
    for _ in range(2):
        steps += [say("Check the index."), say("Read the page.")]
    steps.append(say("It is 7."))
    reply = run(context(steps))
    assert reply["verdict"] == "failure"
    assert (reply["first_critical_step"], reply["error_category"]) == (3, "repeated_action_loop")
    assert "alternate" in reply["rationale"]


@pytest.mark.parametrize(
    ("tail", "critical"),
    [
        ([call("get_user", {"id": "u1"}), result('{"id": "u1"}')], 2),  # ends on a result
        ([call("get_user", {"id": "u1"})], 2),  # ends on a call
        ([say("")], 2),  # ends on an empty message
        ([say("   "), user("###STOP###")], 2),  # the user's last word does not count
    ],
)
def test_no_final_answer_is_premature_termination(tail, critical):
    steps = [user("Who am I?"), say("Let me check."), *tail]
    reply = run(context(steps))
    assert reply["verdict"] == "failure"
    assert (reply["first_critical_step"], reply["error_category"]) == (
        critical,
        "premature_termination",
    )


def test_a_final_handoff_is_a_deliberate_end():
    steps = [
        user("I want a human."),
        say("Shall I transfer you to a human agent?"),
        user("Yes please."),
        call("transfer_to_human_agents", {"summary": "wants a human"}),
        result("Transfer successful"),
    ]
    assert run(context(steps, {"success": True, "reward": 1.0}))["verdict"] == "success"


def test_a_state_change_without_confirmation_is_flagged():
    unconfirmed = [
        user("Yes, cancel my reservation R1."),  # the opening request confirms nothing
        call("cancel_reservation", {"id": "R1"}),
        result('{"status": "cancelled"}'),
        say("Reservation R1 is cancelled."),
        user("Thanks"),
    ]
    reply = run(context(unconfirmed, {"success": True, "reward": 1.0}))
    assert reply["verdict"] == "partial"
    assert (reply["first_critical_step"], reply["error_category"]) == (
        1,
        "unconfirmed_side_effect",
    )
    assert "cancel_reservation" in reply["rationale"]

    confirmed = [
        user("Cancel my reservation R1."),
        say("I will cancel R1 (refund to your card). Shall I proceed?"),
        user("Yes, go ahead."),
        call("get_reservation", {"id": "R1"}, "c0"),
        result('{"id": "R1"}', "c0"),
        *unconfirmed[1:],
    ]
    assert run(context(confirmed, {"success": True, "reward": 1.0}))["verdict"] == "success"

    for answer in ("Hmm, what would the refund be?", "No, please don't proceed yet."):
        not_a_yes = [*confirmed[:2], user(answer), *unconfirmed[1:]]
        reply = run(context(not_a_yes))
        assert reply["error_category"] == "unconfirmed_side_effect"
        assert "the user's step 2 does not confirm it" in reply["rationale"]


def test_a_failed_outcome_without_signals_falls_back_with_low_confidence():
    steps = [
        user("Change my flight to HAT002."),
        call("get_reservation", {"id": "R1"}, "c0"),
        result('{"id": "R1"}', "c0"),
        say("I will move R1 to HAT002. Shall I proceed?"),
        user("Yes."),
        call("update_reservation_flights", {"id": "R1", "flight": "HAT003"}, "c1"),
        result('{"id": "R1", "flight": "HAT003"}', "c1"),
        say("Done: you are on HAT003."),
    ]
    reply = run(context(steps, {"success": False, "reward": 0.0}))
    assert reply["verdict"] == "failure"
    assert reply["first_critical_step"] == 5  # the first state-changing call
    assert reply["root_cause_step"] == 5
    assert reply["error_category"] == ""
    assert reply["confidence"] <= 30
    assert "guess" in reply["rationale"]

    chat = [user("What is 2+2?"), say("It is 5."), user("thanks")]
    reply = run(context(chat, {"success": None, "reward": 0.0}))  # reward 0 alone fails it
    assert (reply["verdict"], reply["first_critical_step"]) == ("failure", 1)


def test_a_success_outcome_without_signals_is_a_confident_success():
    steps = [user("What is 2+2?"), say("It is 4.")]
    reply = run(context(steps, {"success": True, "reward": 1.0}))
    assert reply == {
        "verdict": "success",
        "first_critical_step": None,
        "root_cause_step": None,
        "error_category": "",
        "responsible_agent": "",
        "rationale": reply["rationale"],
        "confidence": 85,
    }
    assert run(context(steps))["confidence"] < 85  # no outcome: less sure


@pytest.mark.parametrize(
    ("categories", "expected"),
    [(["wrong_tool", "other"], "other"), (["wrong_tool"], ""), ([], "")],
)
def test_only_the_projects_categories_are_used(categories, expected):
    steps = [user("Who am I?"), call("get_user", {"id": "u1"})]
    reply = run(context(steps, categories=categories))
    assert reply["error_category"] == expected


def test_multi_agent_log_names_the_responsible_agent():
    # Who&When's algorithm-generated shape: agents write as `user`, a code runner reports
    steps = [
        {"role": "assistant", "name": "Planner", "content": "Task: count the rows."},
        {"role": "user", "name": "Coder", "content": "```python\nprint(len(rows))\n```"},
        {
            "role": "user",
            "name": "Computer_terminal",
            "content": "exitcode: 1 (execution failed)\nCode output: Traceback (most recent "
            "call last):\n  File \"x\", line 1\nNameError: name 'rows' is not defined",
        },
        {"role": "user", "name": "Verifier", "content": "The count is 12. TERMINATE"},
    ]
    reply = run(context(steps, {"success": False, "reward": None}))
    assert reply["verdict"] == "failure"
    assert reply["first_critical_step"] == 3
    assert reply["root_cause_step"] == 1
    assert reply["responsible_agent"] == "Verifier"
    assert "NameError" in reply["rationale"]

    steps[3]["content"] = "The variable rows is not defined; let me load it first."
    reply = run(context(steps, {"success": False, "reward": None}))
    assert reply["error_category"] == ""  # acknowledged: the fallback, the code that ran
    assert (reply["first_critical_step"], reply["responsible_agent"]) == (1, "Coder")


def test_step_labels():
    steps = [
        user("Book HAT001 for me."),
        call("get_user", {"id": "u1"}, "c0"),
        result('{"id": "u1"}', "c0"),
        say("I will book HAT001 for $100. Shall I proceed?"),
        user("Yes."),
        call("book_reservation", {"flight": "HAT001"}, "c1"),
        result("Error: payment method not found", "c1"),
        say("Your booking is complete!"),
        user("thanks"),
    ]
    reply = run(context(steps, {"success": False, "reward": 0.0}, with_steps=True))
    labels = {s["step"]: (s["label"], s["score"]) for s in reply["steps"]}
    assert labels == {
        1: ("exploration", 2),  # a read-only call
        3: ("progress", 3),  # a message
        5: ("no_progress", -2),  # a call answered by an error
        7: ("regression", -7),  # the step the signal fires at
    }
    scores = run(context(steps, question="step_scores"))
    assert scores == {"steps": reply["steps"]}
    assert {label for label, _ in labels.values()} <= set(STEP_LABELS)


def test_successful_writes_are_progress_and_repeats_no_progress():
    steps = [
        user("Cancel R1."),
        say("Cancel R1, shall I proceed?"),
        user("yes"),
        call("cancel_reservation", {"id": "R1"}, "c1"),
        result('{"status": "cancelled"}', "c1"),
        call("get_reservation", {"id": "R1"}, "c2"),
        result('{"status": "cancelled"}', "c2"),
        call("get_reservation", {"id": "R1"}, "c3"),
        result('{"status": "cancelled"}', "c3"),
        say("R1 is cancelled."),
    ]
    reply = run(context(steps, question="step_scores"))
    labels = {s["step"]: s["label"] for s in reply["steps"]}
    assert labels == {
        1: "progress",
        3: "progress",
        5: "exploration",
        7: "no_progress",
        9: "progress",
    }


@pytest.mark.parametrize(
    ("ctx", "message"),
    [
        (None, "request.context"),
        ({"question": "decisive_step", "trajectory": {"steps": []}}, "all_at_once"),
        ({"question": "half", "trajectory": {"steps": []}}, "all_at_once"),
        ({"question": "judge"}, "steps"),
        ({"question": "judge", "trajectory": {"steps": "no"}}, "steps"),
        ({"question": "judge", "trajectory": {"steps": ["no"]}}, "steps[0]"),
        ({"question": "judge", "categories": "x", "trajectory": {"steps": []}}, "categories"),
    ],
)
def test_bad_requests_get_error_results_not_exceptions(ctx, message):
    good = context([user("hi"), say("hello")])
    results = HeuristicBackend().generate(
        [
            GenerationRequest(messages=[], context=good),
            GenerationRequest(messages=[], context=ctx),
            GenerationRequest(messages=[], context=good),
        ]
    )
    assert [r.ok for r in results] == [True, False, True]
    assert message in results[1].error
    assert results[1].text == ""
    assert results[0].text == results[2].text


def test_odd_step_fields_are_tolerated():
    steps = [
        {"role": "user", "content": None},
        {"role": "assistant", "content": ["parts"], "tool_calls": "nope"},
        {"role": "assistant", "tool_calls": [{"function": {"name": "get_x", "arguments": "{"}}]},
        {"role": "tool", "content": 12},
        {"role": "assistant", "content": "done", "reasoning": None},
    ]
    reply = run(context(steps, with_steps=True))
    assert reply["verdict"] in ("success", "partial", "failure")


def test_same_input_same_output():
    steps = [
        user("Book it."),
        call("book_reservation", {"flight": "HAT001"}),
        result("Error: not enough seats on flight HAT001"),
        say("Booked!"),
    ]
    ctx = context(steps, with_steps=True)
    backend = HeuristicBackend()
    texts = {r.text for r in backend.generate([GenerationRequest([], context=ctx)] * 3)}
    assert len(texts) == 1


def test_huge_contents_are_fast():
    huge = "\n" * 5_000_000 + "a " * 2_500_000
    steps = [
        user(huge),
        call("book_x", {"payload": huge}),
        result(huge + "Error:"),
        say(huge),
    ]
    started = time.perf_counter()
    reply = run(context(steps, with_steps=True))
    assert time.perf_counter() - started < 5
    assert len(reply["rationale"]) <= 1000


# --- the real runs ------------------------------------------------------------------------------


def contexts(shared_data: Path, pattern: str) -> list[tuple[dict, dict[str, Any]]]:
    out = []
    for path in sorted(shared_data.glob(pattern)):
        raw = json.loads(path.read_text())
        for item in raw if isinstance(raw, list) else [raw]:
            record, _ = to_record(item, None, path.name)
            data = record.to_dict()
            ctx = context([], with_steps=True)
            ctx["trajectory"].update(
                steps=[{"index": i, **s} for i, s in enumerate(data["steps"])],
                tools=data["tools"],
                task=data["task"],
                outcome=data["outcome"],
            )
            out.append((item, ctx))
    return out


@pytest.mark.shared_data
def test_who_and_when_logs_get_valid_judgements_naming_their_agents(shared_data):
    runs = contexts(shared_data, "who-and-when/algorithm-generated/*.json")
    assert len(runs) == 126
    for raw, ctx in runs:
        reply = run(ctx)
        assert reply["verdict"] == "failure"  # every log is a failed run
        critical = reply["first_critical_step"]
        assert critical is not None
        assert reply["responsible_agent"] == raw["history"][critical]["name"]
        assert reply["responsible_agent"] != "Computer_terminal"


@pytest.mark.shared_data
def test_tau_bench_verdicts_follow_the_reward(shared_data):
    runs = contexts(shared_data, "tau-bench/*-airline.json")
    assert len(runs) == 200
    for raw, ctx in runs:
        reply = run(ctx)
        if raw["reward"] == 0:
            assert reply["verdict"] == "failure"
        else:
            assert reply["verdict"] in ("success", "partial")
        labelled = {s["step"] for s in reply["steps"]}
        assistant = {i for i, m in enumerate(raw["traj"]) if m["role"] == "assistant"}
        assert labelled == assistant
