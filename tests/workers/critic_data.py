"""Tiny labelled data for the critic tests: multi-agent runs where a tool call fails and the
next agent step carries on regardless (the first critical error), one task per run."""

from __future__ import annotations

import uuid
from typing import Any

from annotate import effective
from annotate.models import Annotation
from curation.models import Project, Step, Task, Trajectory
from workers.critic.training import Example


def steps_of(i: int) -> tuple[list[dict[str, Any]], int]:
    """The steps of run `i` and its critical step: 2 to 4 call/result pairs, the pair
    `i % pairs` answered by an error that the next agent step ignores."""
    pairs = 2 + i % 3
    failing = i % pairs
    steps: list[dict[str, Any]] = [{"role": "user", "content": f"Find the price of item {i}."}]
    critical = -1
    for pair in range(pairs):
        call = f"c{pair}"
        steps.append(
            {
                "role": "assistant",
                "name": "planner" if pair % 2 == 0 else "solver",
                "content": f"Looking up part {pair} of item {i}.",
                "tool_calls": [{"id": call, "name": "lookup", "arguments": {"part": pair}}],
            }
        )
        result = "Error: lookup failed" if pair == failing else f"part {pair} costs {pair + 3}"
        steps.append({"role": "tool", "name": "lookup", "tool_call_id": call, "content": result})
        if pair == failing:
            critical = len(steps)
    steps.append({"role": "assistant", "name": "solver", "content": f"The price is {i + 7}."})
    return steps, critical


def payload(steps: list[dict[str, Any]], instruction: str = "") -> dict[str, Any]:
    """Steps in the judges' shape (workers.judging.runs.payloads)."""
    full = [
        {
            "index": index,
            "role": s["role"],
            "name": s.get("name", ""),
            "content": s.get("content", ""),
            "reasoning": "",
            "tool_calls": s.get("tool_calls", []),
            "tool_call_id": s.get("tool_call_id", ""),
        }
        for index, s in enumerate(steps)
    ]
    return {"steps": full, "task": {"instruction": instruction}, "outcome": {"success": False}}


def agent_at(steps: list[dict[str, Any]], index: int) -> str:
    return steps[index].get("name", "")


def examples(count: int) -> list[Example]:
    out = []
    for i in range(count):
        steps, critical = steps_of(i)
        out.append(
            Example(
                i,
                f"task-{i}",
                payload(steps, f"price of item {i}"),
                critical,
                agent_at(steps, critical),
            )
        )
    return out


def add_run(project: Project, i: int, gold: bool = True, human: Any = None) -> Trajectory:
    """Run `i` in the project under its own task, with a gold label (or a human one by the
    user `human`) naming its critical step, and its effective label."""
    steps, critical = steps_of(i)
    task, _ = Task.objects.get_or_create(
        project=project, external_id=f"task-{i}", defaults={"instruction": f"price of item {i}"}
    )
    trajectory = Trajectory.objects.create(
        project=project,
        task=task,
        source_format="test",
        content_hash=uuid.uuid4().hex,
        step_count=len(steps),
        success=False,
    )
    Step.objects.bulk_create(
        Step(
            trajectory=trajectory,
            index=index,
            role=s["role"],
            name=s.get("name", ""),
            content=s.get("content", ""),
            tool_calls=s.get("tool_calls", []),
            tool_call_id=s.get("tool_call_id", ""),
        )
        for index, s in enumerate(steps)
    )
    if gold or human is not None:
        Annotation.objects.create(
            trajectory=trajectory,
            source=Annotation.Source.HUMAN if human is not None else Annotation.Source.GOLD,
            source_name="" if human is not None else "dataset",
            author=human,
            verdict="failure",
            first_critical_step=critical,
            root_cause_step=critical,
            responsible_agent=agent_at(steps, critical),
        )
    effective.refresh([trajectory.pk])
    return trajectory
