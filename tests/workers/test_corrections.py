"""Teacher corrections end to end: a scripted OpenAI-compatible server (a real local HTTP
server) plays teacher, reflector, simulator and verifying judge; both modes, the replay and
simulated environments, guidance on and off."""

from __future__ import annotations

import json
from typing import Any

import pytest

from curation.models import Project, Step, ToolSet, Trajectory
from tests.annotate.helpers import label_failure, make_trajectory
from tests.workers.judge_server import completion, judge_server
from workers.corrections import runner
from workers.models import Correction, CorrectionBatch, JudgeConfig, TeacherConfig

TOOLS = [
    {"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "book", "parameters": {"type": "object"}}},
]
STEPS = [
    {"role": "system", "content": "You book flights. Confirm before booking."},
    {"role": "user", "content": "Book me a flight to Paris."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "name": "search", "arguments": {"to": "PAR"}}],
    },
    {"role": "tool", "content": '{"flights": ["AF1"]}', "tool_call_id": "c1", "name": "search"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c2", "name": "book", "arguments": {"flight": "AF1"}}],
    },
    {"role": "tool", "content": "booked AF1", "tool_call_id": "c2", "name": "book"},
    {"role": "assistant", "content": "Booked AF1."},
]
GUIDANCE = "SECRET-GUIDANCE: ask the user to confirm before booking."


def judge_reply(verdict: str, step: int | None) -> str:
    return json.dumps(
        {
            "verdict": verdict,
            "first_critical_step": step,
            "root_cause_step": step,
            "error_category": "" if verdict == "success" else "unconfirmed_side_effect",
            "responsible_agent": "",
            "rationale": f"judged {verdict}",
            "confidence": 90,
        }
    )


class Script:
    """Answers by who is asked (read from the system message); teacher turns in order."""

    def __init__(self, teacher: list[dict], verdict: tuple[str, int | None] = ("success", None)):
        self.teacher = iter(teacher)
        self.verdict = verdict
        self.asked: list[str] = []

    def __call__(self, body: dict) -> tuple[int, Any]:
        system = body["messages"][0]["content"]
        if "Write the next assistant turn" in system:
            self.asked.append("teacher")
            return completion(json.dumps(next(self.teacher)))
        if "corrective" in system or "concrete guidance" in system:
            self.asked.append("reflector")
            return completion(json.dumps({"guidance": GUIDANCE}))
        if "You simulate the tools" in system:
            self.asked.append("tool")
            return completion(json.dumps({"content": '{"confirmed": true}'}))
        if "You play the user" in system:
            self.asked.append("user")
            return completion(json.dumps({"reply": "Thanks, all good.", "done": True}))
        self.asked.append("judge")
        return completion(judge_reply(*self.verdict))


@pytest.fixture
def failed(project: Project) -> Trajectory:
    trajectory = make_trajectory(project, STEPS, success=False)
    toolset = ToolSet.objects.create(project=project, tools=TOOLS, content_hash="t" * 64)
    Trajectory.objects.filter(pk=trajectory.pk).update(toolset=toolset)
    label_failure(
        trajectory,
        4,
        root_cause_step=4,
        error_category="unconfirmed_side_effect",
        rationale="Booked without asking.",
    )
    return trajectory


def run(project: Project, base_url: str, **options: Any) -> CorrectionBatch:
    common = {"options": {"base_url": base_url, "backoff_s": 0.01}, "max_attempts": 2}
    teacher = TeacherConfig.objects.create(
        project=project, name="teacher", backend="openai", model="big", **common
    )
    verifier = JudgeConfig.objects.create(
        project=project,
        name="verifier",
        backend="openai",
        model="judge",
        score_steps=False,
        **common,
    )
    batch = runner.start_batch(
        teacher,
        project.trajectories.exclude(agent_role="correction"),
        verifier=verifier,
        send=False,
        **options,
    )
    runner.correct(batch.corrections.values_list("pk", flat=True))
    batch.refresh_from_db()
    return batch


def step_rows(trajectory: Trajectory) -> list[tuple]:
    return list(
        trajectory.steps.order_by("index").values_list(
            "index",
            "role",
            "name",
            "content",
            "reasoning",
            "tool_calls",
            "tool_call_id",
            "metadata",
        )
    )


ASK_FIRST = {"content": "AF1 is available. Shall I book it?", "tool_calls": []}


@pytest.mark.django_db
def test_mode_step_keeps_the_prefix_as_recorded_and_writes_the_critical_step_again(
    project, failed
) -> None:
    script = Script([ASK_FIRST])
    with judge_server(script) as server:
        batch = run(project, server.base_url, mode="step")

    correction = Correction.objects.get()
    assert (batch.status, correction.status) == ("done", "accepted")
    corrected = correction.result
    assert (corrected.parent, corrected.branch_step, corrected.agent_role) == (
        failed,
        4,
        "correction",
    )
    assert corrected.agent_model == "big" and corrected.tools == TOOLS
    assert step_rows(corrected)[:4] == step_rows(failed)[:4]  # byte-identical prefix
    new = corrected.steps.get(index=4)
    assert (new.role, new.content, new.tool_calls) == ("assistant", ASK_FIRST["content"], [])
    assert corrected.step_count == 5
    assert script.asked == ["teacher", "judge"]
    assert "judged success" in correction.reason


@pytest.mark.django_db
def test_the_teacher_sees_the_prefix_as_chat_messages_with_the_tools(project, failed) -> None:
    with judge_server(Script([ASK_FIRST])) as server:
        run(project, server.base_url, mode="step")
        body = server.requests[0]

    messages = body["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "tool"]
    assert "Confirm before booking" in messages[0]["content"] and '"book"' in messages[0]["content"]
    assert messages[2]["tool_calls"][0]["function"] == {
        "name": "search",
        "arguments": '{"to": "PAR"}',
    }
    assert messages[3]["tool_call_id"] == "c1"
    schema = body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["tool_calls"]["items"]["properties"]["name"]["enum"] == [
        "book",
        "search",
    ]


@pytest.mark.django_db
def test_guidance_steers_the_teacher_and_never_enters_the_steps(project, failed) -> None:
    script = Script([ASK_FIRST])
    with judge_server(script) as server:
        run(project, server.base_url, mode="step", guidance=True)
        teacher_request = next(
            b for b in server.requests if "Write the next" in b["messages"][0]["content"]
        )

    correction = Correction.objects.get()
    assert correction.guidance == GUIDANCE
    assert GUIDANCE in teacher_request["messages"][0]["content"]
    assert script.asked[:2] == ["reflector", "teacher"]
    assert not Step.objects.filter(
        trajectory=correction.result, content__contains="SECRET-GUIDANCE"
    ).exists()


@pytest.mark.django_db
def test_rollout_replays_recorded_results_and_keeps_call_ids_consistent(project, failed) -> None:
    turns = [
        {"content": "", "tool_calls": [{"name": "search", "arguments": {"to": "PAR"}}]},
        {"content": "Shall I book AF1?", "tool_calls": []},
    ]
    with judge_server(Script(turns)) as server:
        run(project, server.base_url, mode="rollout", environment="replay")

    correction = Correction.objects.get()
    steps = list(correction.result.steps.filter(index__gte=4).order_by("index"))
    assert [s.role for s in steps] == ["assistant", "tool", "assistant"]
    call_id = steps[0].tool_calls[0]["id"]
    assert call_id.startswith(f"fix{correction.pk}-") and steps[1].tool_call_id == call_id
    assert steps[1].content == '{"flights": ["AF1"]}'  # the recorded result of the same call
    assert "replied to the user" in correction.stop_reason
    assert correction.status == "accepted"  # the verifier judged the rollout a success


@pytest.mark.django_db
def test_replay_stops_at_a_call_it_never_saw(project, failed) -> None:
    turns = [{"content": "", "tool_calls": [{"name": "search", "arguments": {"to": "LYS"}}]}]
    with judge_server(Script(turns, verdict=("failure", 4))) as server:
        run(project, server.base_url, mode="rollout", environment="replay")

    correction = Correction.objects.get()
    assert "no recorded result for search" in correction.stop_reason
    assert correction.status == "rejected"
    assert "failure (step 4). judged failure" in correction.reason


@pytest.mark.django_db
def test_simulated_environment_plays_tools_and_the_user(project, failed) -> None:
    turns = [
        {
            "content": "",
            "tool_calls": [{"name": "book", "arguments": {"flight": "AF1", "confirmed": True}}],
        },
        {"content": "Booked.", "tool_calls": []},
    ]
    script = Script(turns)
    with judge_server(script) as server:
        run(project, server.base_url, mode="rollout", environment="simulated")

    correction = Correction.objects.get()
    assert correction.error == ""
    steps = list(correction.result.steps.filter(index__gte=4).order_by("index"))
    assert [s.role for s in steps] == ["assistant", "tool", "assistant"]
    assert steps[1].content == '{"confirmed": true}'
    assert script.asked == ["teacher", "tool", "teacher", "user", "judge"]
    assert "simulated user ended" in correction.stop_reason


@pytest.mark.django_db
def test_trajectories_without_a_critical_step_are_skipped_with_the_reason(project, failed) -> None:
    make_trajectory(project, STEPS, success=True)
    with judge_server(Script([ASK_FIRST])) as server:
        batch = run(project, server.base_url, mode="step")

    assert batch.total == 1
    assert batch.skipped[0]["reason"] == "its effective label names no first critical step"


@pytest.mark.django_db
def test_a_correction_of_a_correction_keeps_the_chain(project, failed) -> None:
    with judge_server(Script([ASK_FIRST, ASK_FIRST], verdict=("failure", 4))) as server:
        run(project, server.base_url, mode="step")
        first = Correction.objects.get().result
        label_failure(first, 4)
        teacher = TeacherConfig.objects.get()
        batch = runner.start_batch(teacher, Trajectory.objects.filter(pk=first.pk), send=False)
        runner.correct(batch.corrections.values_list("pk", flat=True))

    second = batch.corrections.get().result
    assert second.parent == first and second.parent.parent == failed
    assert batch.corrections.get().status == "generated"  # no verifier: left for review


@pytest.mark.django_db
def test_running_again_generates_nothing_twice(project, failed) -> None:
    with judge_server(Script([ASK_FIRST])) as server:
        batch = run(project, server.base_url, mode="step")
        runner.correct(batch.corrections.values_list("pk", flat=True))
        assert len(server.requests) == 2  # one teacher turn, one verification

    assert Trajectory.objects.filter(agent_role="correction").count() == 1


@pytest.mark.django_db
def test_an_unknown_environment_is_refused(project, failed) -> None:
    teacher = TeacherConfig.objects.create(project=project, name="t", backend="openai", model="m")
    with pytest.raises(ValueError, match="unknown environment 'gym'"):
        runner.start_batch(teacher, project.trajectories.all(), environment="gym", send=False)
    assert not CorrectionBatch.objects.exists()
