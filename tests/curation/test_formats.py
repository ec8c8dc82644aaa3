"""Every importer round-trips through the canonical record; detection picks the format by content.

The round trip is: record = to_record(raw); raw2 = module.dump(record); to_record(raw2) == record.
"""

from __future__ import annotations

import copy
import json

import pytest

from curation.canonical import Labels, RecordError
from curation.formats import FORMATS, detect, to_record
from tests.curation.helpers import WHO_AND_WHEN_HAND_CRAFTED

CANONICAL = {
    "id": "run-17",
    "task": {
        "id": "airline-3",
        "instruction": "Book me a flight to Seattle.",
        "reference": {"actions": [{"name": "book", "kwargs": {"to": "SEA"}}]},
        "metadata": {"domain": "airline"},
    },
    "agent": {"model": "gpt-4o", "role": "teacher"},
    "tools": [{"type": "function", "function": {"name": "get_user", "parameters": {}}}],
    "steps": [
        {"role": "system", "content": "You are an airline agent."},
        {"role": "user", "content": "Book me a flight to Seattle."},
        {
            "role": "assistant",
            "content": "",
            "reasoning": "I need the user first.",
            "tool_calls": [{"id": "c1", "name": "get_user", "arguments": {"id": "u1"}}],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "name": "get_user",
            "content": '{"id": "u1"}',
            "metadata": {"latency_ms": 12},
        },
        {"role": "assistant", "content": "Done.", "name": "Booker"},
    ],
    "outcome": {"success": False, "reward": 0.0, "info": {"why": "wrong flight"}},
    "labels": {
        "verdict": "failure",
        "first_critical_step": 2,
        "root_cause_step": 0,
        "category": "wrong_arguments",
        "rationale": "Asked for the wrong user.",
        "annotator": "gold",
        "agent": "Booker",
        "confidence": 0.5,
        "extra": {"severity": 3},
    },
    "metadata": {"batch": 7},
}

OPENAI = {
    "id": "chat-1",
    "model": "gpt-4o-mini",
    "tools": [{"type": "function", "function": {"name": "lookup", "parameters": {}}}],
    "messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Where is"}, "my bag?"]},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "Look the bag up.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": '{"bag": "B7"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": "{not json"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "name": "lookup", "content": "in Denver"},
        {"role": "function", "name": "lookup", "content": "error"},
        {"role": "assistant", "content": "Your bag is in Denver.", "name": "helper"},
    ],
    "outcome": {"success": True, "reward": 1},
    "labels": [
        {"verdict": "partial", "first_critical_step": 4, "annotator": "alice"},
        {"verdict": "success", "annotator": "bob", "confidence": 0.9},
    ],
    "metadata": {"source": "prod"},
}

SHAREGPT = {
    "id": "sg-1",
    "system": "You can call tools.",
    "tools": json.dumps([{"name": "weather", "parameters": {}}]),
    "conversations": [
        {"from": "human", "value": "Weather in Paris?"},
        {"from": "function_call", "value": '{"name": "weather", "arguments": {"city": "Paris"}}'},
        {"from": "observation", "value": "18C"},
        {"from": "gpt", "value": "It is 18C."},
        {"from": "user", "value": "And tomorrow?"},
        {"from": "assistant", "value": "No idea."},
        {"from": "tool", "value": "noise"},
        {"from": "system", "value": "late system note"},
    ],
    "labels": {"verdict": "partial", "first_critical_step": 6, "annotator": "carol"},
}

TAU_BENCH = {
    "task_id": 3,
    "reward": 1.0,
    "trial": 2,
    "info": {
        "task": {
            "user_id": "mia_li_3668",
            "instruction": "You want to fly to Seattle.",
            "actions": [{"name": "book_reservation", "kwargs": {"to": "SEA"}}],
            "outputs": [],
        },
        "source": "user",
        "reward_info": {"reward": 1.0, "actions": []},
    },
    "traj": [
        {"role": "system", "content": "# Airline Agent Policy"},
        {"role": "user", "content": "Hi, I want to fly."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_user_details", "arguments": '{"user_id": "mia"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "name": "get_user_details", "content": "{}"},
        {"role": "assistant", "content": "Booked."},
    ],
}

WHO_AND_WHEN_ALGORITHM = {
    "is_correct": False,
    "question": "How many clients get the sunset design?",
    "question_ID": "4d51c4bf",
    "level": "2",
    "ground_truth": "8",
    "history": [
        {"content": "Solve the task.", "role": "assistant", "name": "Planner_Expert"},
        {"content": "print(1)", "role": "user", "name": "Computer_terminal"},
        {"content": "The answer is 7.", "role": "assistant", "name": "Data_Expert"},
        {"content": "odd role", "role": "critic", "name": "Verifier_Expert"},
    ],
    "mistake_agent": "Data_Expert",
    "mistake_step": "2",
    "mistake_reason": "Counted the even addresses.",
    "system_prompt": {"Data_Expert": "You analyse data."},
    "annotator_notes": "kept as given",
}


SAMPLES = {
    "canonical": CANONICAL,
    "openai": OPENAI,
    "sharegpt": SHAREGPT,
    "tau_bench": TAU_BENCH,
    "who_and_when": WHO_AND_WHEN_ALGORITHM,
}


def round_trip(raw: dict, source: str = "") -> None:
    record, name = to_record(copy.deepcopy(raw), None, source)
    raw2 = FORMATS[name].dump(record)
    json.dumps(raw2)  # a dump is plain JSON
    record2, name2 = to_record(json.loads(json.dumps(raw2)), None, source)
    assert name2 == name
    assert record2 == record


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_each_format_round_trips_through_the_canonical_record(name):
    round_trip(SAMPLES[name], "runs/gpt-4o-airline.json" if name == "tau_bench" else "")


def test_who_and_when_hand_crafted_logs_round_trip():
    round_trip(WHO_AND_WHEN_HAND_CRAFTED, "hand/7.json")


def test_who_and_when_round_trips_an_agent_blamed_without_a_step():
    raw = {**WHO_AND_WHEN_ALGORITHM, "mistake_step": ""}
    record, _ = to_record(raw, None)
    assert record.labels[0].first_critical_step is None
    assert record.labels[0].agent == "Data_Expert"
    round_trip(raw)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_auto_detection_picks_the_format_by_content(name):
    assert detect(SAMPLES[name]).NAME == name
    _, detected = to_record(copy.deepcopy(SAMPLES[name]), None)
    assert detected == name


def test_hand_crafted_who_and_when_is_detected():
    assert detect(WHO_AND_WHEN_HAND_CRAFTED).NAME == "who_and_when"


def test_format_option_overrides_detection():
    both = {
        "messages": [{"role": "user", "content": "from messages"}],
        "conversations": [{"from": "human", "value": "from conversations"}],
    }
    assert to_record(both, None)[0].steps[0].content == "from messages"
    record, name = to_record(both, "sharegpt")
    assert name == "sharegpt"
    assert record.steps[0].content == "from conversations"


def test_format_option_reads_records_detection_cannot_place():
    bare = {"history": [{"role": "human", "content": "hi"}, {"role": "Agent", "content": "yo"}]}
    with pytest.raises(RecordError, match="cannot tell the format"):
        to_record(bare, None)
    record, name = to_record(bare, "who_and_when")
    assert name == "who_and_when"
    assert [s.name for s in record.steps] == ["", "Agent"]


def test_format_option_on_a_record_of_another_shape_names_the_missing_field():
    with pytest.raises(RecordError) as info:
        to_record({"steps": [{"role": "user", "content": "x"}]}, "openai")
    assert info.value.field == "messages"
    with pytest.raises(RecordError) as info:
        to_record({"traj": []}, "tau_bench")
    assert info.value.field == "task_id"


def test_canonical_record_keeps_every_field():
    record, _ = to_record(copy.deepcopy(CANONICAL), None)
    assert record.id == "run-17"
    assert record.task_id == "airline-3"
    assert record.agent_model == "gpt-4o"
    assert record.agent_role == "teacher"
    assert record.reward == 0.0 and record.success is False
    assistant = record.steps[2]
    assert assistant.reasoning == "I need the user first."
    assert assistant.tool_calls[0].name == "get_user"
    assert assistant.tool_calls[0].arguments == {"id": "u1"}
    assert record.steps[3].tool_call_id == "c1"
    assert record.steps[3].name == "get_user"
    assert record.labels == [
        Labels(
            verdict="failure",
            first_critical_step=2,
            root_cause_step=0,
            category="wrong_arguments",
            rationale="Asked for the wrong user.",
            annotator="gold",
            agent="Booker",
            confidence=0.5,
            extra={"severity": 3},
        )
    ]


def test_openai_messages_become_steps_one_for_one():
    record, _ = to_record(copy.deepcopy(OPENAI), None)
    assert [s.role for s in record.steps] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]
    assert record.steps[0].metadata == {"original_role": "developer"}
    assert record.steps[1].content == "Where is\nmy bag?"
    calls = record.steps[2].tool_calls
    assert calls[0].arguments == {"bag": "B7"}
    assert calls[1].arguments == "{not json"  # malformed arguments are kept as written
    assert record.steps[2].reasoning == "Look the bag up."
    assert record.agent_model == "gpt-4o-mini"
    assert [la.annotator for la in record.labels] == ["alice", "bob"]


def test_sharegpt_speakers_map_to_roles_and_the_system_prompt_is_step_zero():
    record, _ = to_record(copy.deepcopy(SHAREGPT), None)
    assert [s.role for s in record.steps] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "tool",
        "system",
    ]
    call = record.steps[2].tool_calls[0]
    assert (call.name, call.arguments) == ("weather", {"city": "Paris"})
    assert record.tools == [{"name": "weather", "parameters": {}}]


def test_tau_bench_success_is_reward_one_and_the_task_comes_from_info():
    record, _ = to_record(copy.deepcopy(TAU_BENCH), None, "x/gpt-4o-airline.json")
    assert record.id == "airline-3/trial-2"
    assert record.task_id == "airline-3"
    assert record.agent_model == "gpt-4o"
    assert record.instruction == "You want to fly to Seattle."
    assert record.reference["actions"] == [{"name": "book_reservation", "kwargs": {"to": "SEA"}}]
    assert record.success is True and record.reward == 1.0
    assert record.outcome_info["reward_info"] == {"reward": 1.0, "actions": []}
    half = {**copy.deepcopy(TAU_BENCH), "reward": 0.5}
    assert to_record(half, None)[0].success is False


def test_who_and_when_algorithm_generated_names_come_from_name():
    record, _ = to_record(copy.deepcopy(WHO_AND_WHEN_ALGORITHM), None, "logs/12.json")
    assert record.id == "12"
    assert [s.name for s in record.steps] == [
        "Planner_Expert",
        "Computer_terminal",
        "Data_Expert",
        "Verifier_Expert",
    ]
    assert [s.role for s in record.steps] == ["assistant", "user", "assistant", "assistant"]
    (gold,) = record.labels
    assert gold.first_critical_step == 2
    assert record.steps[gold.first_critical_step].name == gold.agent == "Data_Expert"
    assert gold.rationale == "Counted the even addresses."
    assert record.metadata["extra"] == {"annotator_notes": "kept as given"}


def test_who_and_when_hand_crafted_agent_is_read_from_role():
    record, _ = to_record(copy.deepcopy(WHO_AND_WHEN_HAND_CRAFTED), None, "hand/7.json")
    assert [s.role for s in record.steps] == [
        "user",
        "assistant",
        "assistant",
        "assistant",
        "assistant",
    ]
    assert [s.name for s in record.steps] == [
        "",
        "Orchestrator",
        "Orchestrator",
        "WebSurfer",
        "Orchestrator",
    ]
    assert record.steps[0].metadata == {"role_as_written": "human"}
    (gold,) = record.labels
    assert gold.first_critical_step == 3
    assert record.steps[3].name == gold.agent == "WebSurfer"
    assert record.instruction == WHO_AND_WHEN_HAND_CRAFTED["question"]
