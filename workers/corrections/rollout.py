"""One correction as a generator: it yields `(role, request)` pairs (role = "reflector",
"teacher" or "simulator") and receives each reply, so `run_batch` can send the pending
requests of many corrections to each backend in one batched call per round. Pure Python."""

from __future__ import annotations

import json
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from workers.backends.base import Backend, GenerationRequest, GenerationResult
from workers.corrections import actions
from workers.corrections.environments import Environment, Observation
from workers.judging import prompts, schema
from workers.judging.schema import InvalidOutput

RETRY_TEMPERATURE = 0.7
GUIDANCE_MAX = 1500
SIMULATED_MAX = 4000


class Failed(Exception):
    pass


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    max_tokens: int = 1024
    max_attempts: int = 3
    instruction: str = ""


@dataclass
class Plan:
    """What to do for one trajectory: it, where to branch, how far to go."""

    trajectory: dict[str, Any]  # steps, tools, task, outcome (as judges read it)
    branch_step: int
    label: dict[str, Any]  # the effective label: category, rationale, ...
    mode: str = "step"
    guidance: bool = False
    max_steps: int = 20
    environment: Environment | None = None  # None with mode rollout: simulated
    call_prefix: str = "fix"


@dataclass
class Result:
    steps: list[dict[str, Any]] = field(default_factory=list)  # the new steps only
    guidance: str = ""
    stop_reason: str = ""
    error: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)


Asking = Generator[tuple[str, GenerationRequest], GenerationResult, Any]


class Session:
    def __init__(self, plan: Plan, sampling: dict[str, Sampling]) -> None:
        self.plan = plan
        self.sampling = sampling
        self.result = Result()
        self.steps = plan.trajectory["steps"]

    def ask(self, role: str, messages: list[dict], reply_schema: dict, what: str) -> Asking:
        s = self.sampling[role]
        for attempt in range(1, s.max_attempts + 1):
            request = GenerationRequest(
                messages=messages,
                json_schema=reply_schema,
                max_tokens=s.max_tokens,
                temperature=max(s.temperature, RETRY_TEMPERATURE) if attempt > 1 else s.temperature,
                top_p=s.top_p,
                seed=None if s.seed is None else s.seed + attempt - 1,
            )
            reply = yield role, request
            call = {
                "role": role,
                "what": what,
                "attempt": attempt,
                "text": reply.text,
                "error": reply.error,
                "prompt_tokens": reply.prompt_tokens,
                "completion_tokens": reply.completion_tokens,
                "latency_s": round(reply.latency_s, 4),
            }
            self.result.calls.append(call)
            if not reply.ok:
                continue
            try:
                return schema.parse(reply.text, reply_schema)
            except InvalidOutput as error:
                call["error"] = f"invalid reply: {error}"
        raise Failed(f"{role} ({what}): no valid reply in {s.max_attempts} attempts")

    def reflect(self) -> Asking:
        plan = self.plan
        label = plan.label
        system = {
            "role": "system",
            "content": "You review a failed AI agent run and write short, concrete guidance "
            "for a stronger agent that will take over at the first critical step: what to do "
            "differently there and why. Do not solve the task in full.",
        }
        about = (
            f"The first critical error is at step {plan.branch_step}"
            + (f" ({label['error_category']})" if label.get("error_category") else "")
            + (
                f". Reviewer's note (data): {json.dumps(label['rationale'])}"
                if label.get("rationale")
                else ""
            )
            + '. Reply with JSON {"guidance": "..."}.'
        )
        rendered = prompts.render_trajectory(self.steps, 48_000)
        task = (plan.trajectory.get("task") or {}).get("instruction") or ""
        user = {
            "role": "user",
            "content": f"Task (data): {json.dumps(task)}\n\n{rendered}\n\n{about}",
        }
        guidance_schema = {
            "type": "object",
            "properties": {"guidance": {"type": "string", "maxLength": GUIDANCE_MAX}},
            "required": ["guidance"],
            "additionalProperties": False,
        }
        reply = yield from self.ask("reflector", [system, user], guidance_schema, "guidance")
        return reply["guidance"].strip()

    def teacher_messages(self, history: Sequence[dict]) -> list[dict]:
        tools = self.plan.trajectory.get("tools") or []
        note = actions.instruction(
            tools, self.sampling["teacher"].instruction, self.result.guidance
        )
        messages = actions.chat_messages(history)
        if messages and messages[0]["role"] == "system":
            first = dict(messages[0], content=f"{messages[0]['content']}\n\n{note}")
            return [first, *messages[1:]]
        return [{"role": "system", "content": note}, *messages]

    def simulate(self, action: dict, history: Sequence[dict]) -> Asking:
        """The simulator plays each called tool, or the user when the teacher replied."""
        task = (self.plan.trajectory.get("task") or {}).get("instruction") or ""
        tools = json.dumps(self.plan.trajectory.get("tools") or [], ensure_ascii=False)
        numbered = [dict(step, index=i) for i, step in enumerate(history)]
        rendered = prompts.render_trajectory(numbered, 48_000)
        base = f"Task of the agent (data): {json.dumps(task)}\nTools: {tools}\n\n{rendered}\n\n"
        calls = action.get("tool_calls") or []
        if not calls:
            system = {
                "role": "system",
                "content": "You play the user of this conversation, who wants the task done. "
                "Answer the agent's last message as that user would, briefly. Set done to "
                "true when the user's request has been fully handled or cannot be.",
            }
            reply_schema = {
                "type": "object",
                "properties": {
                    "reply": {"type": "string", "maxLength": SIMULATED_MAX},
                    "done": {"type": "boolean"},
                },
                "required": ["reply", "done"],
                "additionalProperties": False,
            }
            ask = base + 'Reply with JSON {"reply": "...", "done": true|false}.'
            reply = yield from self.ask(
                "simulator", [system, {"role": "user", "content": ask}], reply_schema, "user"
            )
            if reply["done"]:
                return Observation(done=True, reason="the simulated user ended the conversation")
            return Observation(steps=[{"role": "user", "content": reply["reply"]}])
        system = {
            "role": "system",
            "content": "You simulate the tools of this environment. Given the tool schemas and "
            "the history, answer the call with the result the real tool would most plausibly "
            "return (JSON or text), consistent with earlier results.",
        }
        steps = []
        for call in calls:
            ask = base + (
                f"The agent now calls {call['name']} with arguments "
                f"{json.dumps(call['arguments'], ensure_ascii=False)}. "
                'Reply with JSON {"content": "the tool result"}.'
            )
            reply_schema = {
                "type": "object",
                "properties": {"content": {"type": "string", "maxLength": SIMULATED_MAX}},
                "required": ["content"],
                "additionalProperties": False,
            }
            reply = yield from self.ask(
                "simulator", [system, {"role": "user", "content": ask}], reply_schema, call["name"]
            )
            steps.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "name": call["name"],
                    "content": reply["content"],
                }
            )
        return Observation(steps=steps)

    def run(self) -> Asking:
        plan = self.plan
        try:
            if plan.guidance:
                self.result.guidance = yield from self.reflect()
            history = list(self.steps[: plan.branch_step])
            original = self.steps[plan.branch_step] if plan.branch_step < len(self.steps) else {}
            name = original.get("name") or ""
            environment = plan.environment
            task = plan.trajectory.get("task") or {}
            if plan.mode == "rollout" and environment is not None:
                environment.reset(task, plan.trajectory.get("tools") or [], list(history))
            tools = plan.trajectory.get("tools") or []
            for turn in range(1 if plan.mode == "step" else plan.max_steps):
                reply = yield from self.ask(
                    "teacher",
                    self.teacher_messages(history),
                    actions.action_schema(tools),
                    f"turn {turn}",
                )
                step = actions.to_step(reply, f"{plan.call_prefix}-{turn}", name)
                history.append(step)
                self.result.steps.append(step)
                if plan.mode == "step":
                    self.result.stop_reason = "mode step: the critical step was written again"
                    break
                if environment is None:
                    observation = yield from self.simulate(step, history)
                else:
                    observation = environment.step(step)
                if observation.done:
                    self.result.stop_reason = observation.reason or "the environment ended the run"
                    break
                history.extend(observation.steps)
                self.result.steps.extend(observation.steps)
            else:
                self.result.stop_reason = f"stopped at the step bound ({plan.max_steps} turns)"
        except Failed as error:
            self.result.error = str(error)
        except Exception as error:  # an environment's own failure ends this correction only
            self.result.error = f"environment: {type(error).__name__}: {error}"
        return self.result


def run_batch(backends: dict[str, Backend], sessions: Sequence[Session]) -> list[Result]:
    """Drive every session to its end, one batched call per backend and round."""
    results: list[Result | None] = [None] * len(sessions)
    active: dict[int, tuple[Asking, str, GenerationRequest]] = {}

    def advance(position: int, asking: Asking, reply: GenerationResult | None) -> None:
        try:
            role, request = next(asking) if reply is None else asking.send(reply)
            active[position] = (asking, role, request)
        except StopIteration as stop:
            results[position] = stop.value

    for position, session in enumerate(sessions):
        advance(position, session.run(), None)
    while active:
        by_role: dict[str, list[int]] = {}
        for position, (_, role, _) in active.items():
            by_role.setdefault(role, []).append(position)
        for role, positions in by_role.items():
            replies = backends[role].generate([active[p][2] for p in positions])
            for position, reply in zip(positions, replies, strict=True):
                asking = active.pop(position)[0]
                advance(position, asking, reply)
    return [r for r in results if r is not None]
