"""Strategies for locating the decisive error (Who&When) as generators: each yields the
requests it needs one at a time and receives the replies, so `run_batch` can advance many
trajectories together, one backend call per round (what makes vLLM and HTTP servers fast).

- all_at_once: one question about the whole trajectory (with per-step labels if asked).
- step_by_step: the whole-trajectory verdict first; on a failure, walk the assistant steps
  asking "is this the decisive error?" and stop at the first yes.
- binary_search: the verdict first; on a failure, halve the range of assistant steps that
  holds the error with each question.

The searches decide the critical step; the verdict, category, agent and rationale come from
the whole-trajectory question. A reply that does not validate is asked again (with some
sampling temperature so a deterministic model can answer differently), at most
`max_attempts` times; then the run fails and nothing is guessed. Pure Python: no Django.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from workers.backends.base import Backend, GenerationRequest, GenerationResult
from workers.judging import prompts, schema
from workers.judging.schema import InvalidOutput, Judgement

RETRY_TEMPERATURE = 0.7
STRATEGIES = ("all_at_once", "step_by_step", "binary_search")


class Failed(Exception):
    """No valid reply to a question within the allowed attempts."""


@dataclass(frozen=True)
class JudgeSettings:
    """What a config version says about asking: rubric, sampling and limits."""

    strategy: str = "all_at_once"
    score_steps: bool = True
    rubric: str = ""
    taxonomy: Sequence[dict[str, str]] = ()
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    max_tokens: int = 1024
    token_budget: int = 16000
    max_attempts: int = 3
    verdict_free: bool = False  # the backend suggests steps without a verdict (step critic)

    @property
    def categories(self) -> list[str]:
        return [entry["name"] for entry in self.taxonomy]


@dataclass
class Outcome:
    """The end of one trajectory's judging: a judgement, or the reason there is none, and a
    log of every call (question, raw reply, error, tokens, latency)."""

    judgement: Judgement | None = None
    error: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)


Asking = Generator[GenerationRequest, GenerationResult, Any]


class Judging:
    """The questions one trajectory is asked, in the order its strategy asks them."""

    def __init__(self, settings: JudgeSettings, trajectory: dict[str, Any]) -> None:
        self.settings = settings
        self.trajectory = trajectory
        self.steps = trajectory["steps"]
        self.outcome = Outcome()

    def ask(
        self, question: str, reply_schema: dict[str, Any], upto: int | None = None, **values: Any
    ) -> Asking:
        """Yield the question until a reply validates; return the parsed reply."""
        s = self.settings
        messages = prompts.messages(
            s.rubric, s.taxonomy, self.trajectory, question, s.token_budget, upto, **values
        )
        context = {
            "question": question,
            "categories": s.categories,
            "trajectory": self.trajectory,
            **values,
        }
        for attempt in range(1, s.max_attempts + 1):
            retry = attempt > 1
            request = GenerationRequest(
                messages=messages,
                json_schema=reply_schema,
                max_tokens=s.max_tokens,
                temperature=max(s.temperature, RETRY_TEMPERATURE) if retry else s.temperature,
                top_p=s.top_p,
                seed=None if s.seed is None else s.seed + attempt - 1,
                context=context,
            )
            result = yield request
            call = {
                "question": question,
                "attempt": attempt,
                "text": result.text,
                "error": result.error,
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.completion_tokens,
                "latency_s": round(result.latency_s, 4),
                **{k: v for k, v in values.items() if k != "with_steps"},
            }
            self.outcome.calls.append(call)
            if not result.ok:
                continue
            try:
                return schema.parse(result.text, reply_schema)
            except InvalidOutput as error:
                call["error"] = f"invalid reply: {error}"
        last = self.outcome.calls[-1]["error"] if self.outcome.calls else "no reply"
        raise Failed(f"{question}: no valid reply in {s.max_attempts} attempts ({last})")

    def whole(self, with_steps: bool) -> Asking:
        reply_schema = schema.judgement_schema(
            len(self.steps), self.settings.categories, with_steps, self.settings.verdict_free
        )
        reply = yield from self.ask("judge", reply_schema, with_steps=with_steps)
        return Judgement.from_reply(reply)

    def candidates(self) -> list[int]:
        """Steps that can hold the decisive error: the agent's own (assistant) steps."""
        indices = [s["index"] for s in self.steps if s["role"] == "assistant"]
        return indices or [s["index"] for s in self.steps]

    def step_by_step(self) -> Asking:
        for index in self.candidates():
            reply = yield from self.ask(
                "decisive_step", schema.decisive_step_schema(), upto=index, step=index
            )
            if reply["decisive"]:
                return index
        return None

    def binary_search(self) -> Asking:
        candidates = self.candidates()
        low, high = 0, len(candidates) - 1
        while low < high:
            mid = (low + high) // 2
            reply = yield from self.ask(
                "half",
                schema.half_schema(),
                upto=candidates[high],
                low=candidates[low],
                mid=candidates[mid],
                high=candidates[high],
            )
            if reply["half"] == "first":
                high = mid
            else:
                low = mid + 1
        return candidates[low] if candidates else None

    def step_scores(self) -> Asking:
        reply = yield from self.ask("step_scores", schema.step_scores_schema(len(self.steps)))
        return {s["step"]: (s["label"], s["score"] / schema.SCORE_TENTHS) for s in reply["steps"]}

    def run(self) -> Asking:
        s = self.settings
        try:
            if s.strategy == "all_at_once":
                self.outcome.judgement = yield from self.whole(s.score_steps)
                return self.outcome
            judgement = yield from self.whole(False)
            if judgement.verdict != "success":
                search = self.step_by_step if s.strategy == "step_by_step" else self.binary_search
                found = yield from search()
                if found is not None:
                    judgement.first_critical_step = found
                    if judgement.root_cause_step is None or judgement.root_cause_step > found:
                        judgement.root_cause_step = found
            if s.score_steps:
                judgement.step_labels = yield from self.step_scores()
            self.outcome.judgement = judgement
        except Failed as error:
            self.outcome.error = str(error)
        return self.outcome


def run_batch(
    backend: Backend, settings: JudgeSettings, trajectories: Sequence[dict[str, Any]]
) -> list[Outcome]:
    """Judge every trajectory, asking all the pending questions of a round in one batch."""
    if settings.strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {settings.strategy!r}")
    outcomes: list[Outcome | None] = [None] * len(trajectories)
    active: dict[int, tuple[Asking, GenerationRequest]] = {}
    for position, trajectory in enumerate(trajectories):
        _start(active, outcomes, position, Judging(settings, trajectory).run())
    while active:
        positions = list(active)
        results = backend.generate([active[p][1] for p in positions])
        for position, result in zip(positions, results, strict=True):
            asking = active.pop(position)[0]
            try:
                active[position] = (asking, asking.send(result))
            except StopIteration as stop:
                outcomes[position] = stop.value
    return [o for o in outcomes if o is not None]


def _start(
    active: dict[int, tuple[Asking, GenerationRequest]],
    outcomes: list[Outcome | None],
    position: int,
    asking: Asking,
) -> None:
    try:
        active[position] = (asking, next(asking))
    except StopIteration as stop:
        outcomes[position] = stop.value
