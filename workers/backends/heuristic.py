"""The `heuristic` judge: no model, a few rules over the structured trajectory in
`request.context` (DESIGN.md section 5). It answers whole-trajectory judgements and per-step
scores; the step-by-step and binary-search strategies need a model.

Signals (each names the step it fires at, and may name an earlier step as its cause):

- ignored_tool_output_or_error: a tool result (a `tool` step, or a code executor's message in a
  multi-agent log) reports an error, and the next agent step has text that neither
  acknowledges it nor mentions what it said. Fires at that agent step; the cause is the step
  that made the failing call.
- repeated_action_loop: an identical tool call (name and arguments) made again with nothing
  new between (no user message, no state-changing call: reading again after those is
  legitimate), or made again after it failed; the same agent message three times or more; or
  an A-B-A-B pattern. Fires at the first repeat.
- premature_termination: the agents' last step is a tool call, a tool result or an empty
  message. A last call that hands the conversation off (`transfer_to_...`) is a deliberate end.
- unconfirmed_side_effect: in a conversation (the user speaks after an agent has), a
  state-changing call (book_..., cancel_..., update_...) where the user's latest message
  before it is not an affirmative reply to an agent's message (the opening request is none).

Verdict. The recorded outcome (success, else reward: 1 success, 0 failure) is trusted:
failure stays failure; success is success without signals and partial with any. With no
outcome, a strong signal (an ignored error, a loop, a missing final answer) means failure, weak
ones (a single repeated call, an unconfirmed side effect) partial, none success.

The first critical step is the earliest step a signal fires at; the root cause step is that
signal's cause when earlier. A failure with no signal gets a guess, with low confidence and
no category: the first step that acted on the world (a state-changing call, else the first
call or code that was run), else the last agent message. Categories outside the project's
taxonomy become "other" when it has one, else "". The responsible agent is the name of the
critical step's agent where agents are named (multi-agent logs), else "".

Step labels (each agent step): a signal's step is a regression (a loop's repeat is
no_progress); a call answered by an error is no_progress; a successful state-changing call, or
code a multi-agent executor ran, is progress; a read-only call is exploration; a message is
progress. Contents are scanned only in their first and last few thousand characters.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workers.backends.base import GenerationRequest, GenerationResult
from workers.judging.schema import AGENT_MAX, RATIONALE_MAX

QUESTIONS = ("judge", "step_scores")
HEAD = 4000  # characters scanned at the start of a content ...
TAIL = 2000  # ... and at its end
ERROR_HEAD = 500  # weak error words count only this close to the start of a tool result
QUOTE = 80  # characters of a content quoted in a rationale
USER_NAMES = {"user", "human"}
HANDOFF = re.compile(r"^(?:transfer|hand_?off|escalate)_?to", re.IGNORECASE)
STATE_CHANGING = {
    "add", "approve", "book", "buy", "cancel", "change", "charge", "create", "delete",
    "drop", "edit", "exchange", "insert", "modify", "move", "order", "pay", "post",
    "purchase", "refund", "remove", "reset", "return", "send", "set", "submit", "transfer",
    "update", "upgrade", "write",
}  # fmt: skip
EXECUTOR_WORDS = {"terminal", "executor", "interpreter", "sandbox"}  # in a code runner's name
EXIT_CODE = re.compile(r"exit\s?code\s?[:=]?\s?(-?\d+)", re.IGNORECASE)
STRONG_ERROR = re.compile(
    r"traceback \(most recent call last\)|^[ \t]*(?:error|exception|fatal)\b"
    r"|\b\w{0,40}(?:error|exception)\s?:",
    re.IGNORECASE | re.MULTILINE,
)
WEAK_ERROR = re.compile(
    r"\b(?:not found|no such|does not exist|invalid|unauthori[sz]ed|forbidden|permission denied"
    r"|timed? ?out|failed|failure|unable to|could not|not (?:enough|available|allowed|permitted)"
    r"|insufficient)\b|\b(?:status(?:[ _]?code)?|http)\W{0,3}[45]\d\d\b"
    r'|"errors?"\s?:\s?(?!null|false|""|\[\]|\{\})|"status"\s?:\s?"(?:error|fail)',
    re.IGNORECASE,
)
ACKNOWLEDGES = re.compile(
    r"\b(?:errors?|fail\w*|sorry|apolog\w*|unfortunately|issues?|problems?|unable|cannot|can't"
    r"|couldn't|could not|didn't|did not|doesn't|does not|invalid|exception|traceback|retry"
    r"|again|instead|fix\w*|correct\w*|mistake|wrong|seems|appears|insufficient|missing"
    r"|however|looks like|not properly|wasn't|isn't|undefined|not defined|unexpected\w*"
    r"|not (?:available|enough|found|possible|work\w*|valid|exist\w*))\b",
    re.IGNORECASE,
)
AFFIRMATIVE = re.compile(
    r"\b(?:yes|yeah|yep|yup|sure|ok|okay|confirm\w*|go ahead|proceed|please do|do it|correct"
    r"|that's right|sounds good|affirmative|approved?|agreed?|absolutely|definitely"
    r"|of course)\b",
    re.IGNORECASE,
)
REFUSAL = re.compile(r"^\W*(?:no|nope|don't|do not|not yet|wait|hold on|stop)\b", re.IGNORECASE)
EXCEPTION_LINE = re.compile(r"^[\w.]{0,80}(?:Error|Exception)\b", re.MULTILINE)
TOKEN = re.compile(r"[a-z0-9_]{3,}")


class ContextError(ValueError):
    """A request whose context the heuristic cannot judge."""


@dataclass
class StepView:
    """One step as the rules see it. `kind`: system, user, agent or result."""

    index: int
    kind: str
    name: str
    text: str  # content and reasoning, capped
    calls: list[tuple[str, str, str]]  # (id, tool name, arguments as canonical JSON)
    call_id: str


@dataclass
class Signal:
    step: int
    category: str
    rationale: str
    confidence: int
    strong: bool
    cause: int | None = None
    repeat: bool = False  # a loop's repeat: no progress rather than harm


@dataclass
class Analysis:
    steps: list[StepView]
    signals: list[Signal] = field(default_factory=list)
    errors: dict[int, str] = field(default_factory=dict)  # result step -> the error it reports
    callers: dict[int, int] = field(default_factory=dict)  # result step -> the calling step
    answers: dict[int, list[tuple[str, str]]] = field(default_factory=dict)  # result -> calls


class HeuristicBackend:
    kind = "heuristic"
    model = "heuristic"

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        return [self._one(request) for request in requests]

    def close(self) -> None:
        """Nothing to release: no model, no connection."""

    def _one(self, request: GenerationRequest) -> GenerationResult:
        started = time.perf_counter()
        try:
            text = json.dumps(answer(request.context), ensure_ascii=False)
        except ContextError as error:
            return GenerationResult(error=str(error), latency_s=time.perf_counter() - started)
        except Exception as error:  # one odd trajectory must not sink the batch
            return GenerationResult(
                error=f"heuristic failed: {type(error).__name__}: {error}",
                latency_s=time.perf_counter() - started,
            )
        return GenerationResult(text=text, latency_s=time.perf_counter() - started)


def answer(context: Any) -> dict[str, Any]:
    """The reply to one request's context, as the schema of its question wants it."""
    if not isinstance(context, dict):
        raise ContextError("the heuristic judges from request.context, and there is none")
    question = context.get("question")
    if question not in QUESTIONS:
        raise ContextError(
            f"the heuristic answers whole-trajectory judgements and step scores only, not "
            f"{question!r}; use strategy all_at_once"
        )
    trajectory = context.get("trajectory")
    if not isinstance(trajectory, dict) or not isinstance(trajectory.get("steps"), list):
        raise ContextError("context.trajectory.steps is missing or not a list")
    categories = context.get("categories") or []
    if not isinstance(categories, list) or not all(isinstance(c, str) for c in categories):
        raise ContextError("context.categories must be a list of names")
    analysis = analyse(trajectory["steps"])
    if question == "step_scores":
        return {"steps": step_labels(analysis, None)}
    reply = judge(analysis, _outcome(trajectory.get("outcome")), categories)
    if context.get("with_steps"):
        reply["steps"] = step_labels(analysis, reply["first_critical_step"])
    return reply


# --- reading the steps ------------------------------------------------------------------------


def _capped(value: Any) -> str:
    text = value if isinstance(value, str) else ""
    return text if len(text) <= HEAD + TAIL else f"{text[:HEAD]}\n{text[-TAIL:]}"


def _arguments_key(arguments: Any) -> str:
    """Arguments as canonical JSON, so `{"a": 1, "b": 2}` given as text or as an object, in
    any key order, is the same call."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return arguments[:HEAD]
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=str)[:HEAD]


def _calls(value: Any) -> list[tuple[str, str, str]]:
    calls = []
    for call in value if isinstance(value, list) else []:
        if not isinstance(call, dict):
            continue
        function = call.get("function") if isinstance(call.get("function"), dict) else call
        name = function.get("name")
        if isinstance(name, str) and name:
            call_id = call.get("id") if isinstance(call.get("id"), str) else ""
            calls.append((call_id, name, _arguments_key(function.get("arguments", {}))))
    return calls


def _words(name: str) -> list[str]:
    """The words of a tool or agent name: `bookFlight`, `book_flight`, `book-flight`."""
    spaced = re.sub(r"([a-z])([A-Z])", r"\1_\2", name[:AGENT_MAX]).lower()
    return [w for w in re.split(r"[^a-z0-9]+", spaced) if w]


def _is_result(role: str, name: str, content: str) -> bool:
    """A tool's answer: a `tool` step, or what a code runner in a multi-agent log said."""
    return role == "tool" or (
        role != "system"
        and (
            not EXECUTOR_WORDS.isdisjoint(_words(name))
            or content.lstrip()[:9].lower() == "exitcode:"
        )
    )


def analyse(raw_steps: list[Any]) -> Analysis:
    rows = []
    for i, raw in enumerate(raw_steps):
        if not isinstance(raw, dict):
            raise ContextError(f"context.trajectory.steps[{i}] is not an object")
        role = raw.get("role") if isinstance(raw.get("role"), str) else ""
        name = raw.get("name") if isinstance(raw.get("name"), str) else ""
        content = _capped(raw.get("content"))
        reasoning = _capped(raw.get("reasoning"))
        rows.append((role, name.strip(), content, reasoning, raw))
    # Frameworks that name their agents (AutoGen group chats) send the other agents'
    # messages as `user` ones: there a named `user` step is an agent's, unless named a user.
    named_agents = any(
        role == "assistant" and name and not _is_result(role, name, content)
        for role, name, content, _, _ in rows
    )
    steps = []
    for i, (role, name, content, reasoning, raw) in enumerate(rows):
        if role == "system":
            kind = "system"
        elif _is_result(role, name, content):
            kind = "result"
        elif role == "assistant" or (
            named_agents and role == "user" and name and name.lower() not in USER_NAMES
        ):
            kind = "agent"
        else:
            kind = "user"
        text = "\n".join(t for t in (reasoning, content) if t)
        call_id = raw.get("tool_call_id") if isinstance(raw.get("tool_call_id"), str) else ""
        calls = _calls(raw.get("tool_calls")) if kind == "agent" else []
        steps.append(StepView(i, kind, name if kind == "agent" else "", text, calls, call_id))
    analysis = Analysis(steps)
    _read_results(analysis)
    for rule in (ignored_errors, repeated_calls, loops, premature_end, unconfirmed_side_effects):
        analysis.signals.extend(rule(analysis))
    analysis.signals.sort(key=lambda s: (s.step, -s.confidence))
    return analysis


def _read_results(analysis: Analysis) -> None:
    """Which agent step each result answers, and the error each result reports."""
    by_call_id: dict[str, tuple[int, tuple[str, str]]] = {}
    last_agent: StepView | None = None
    for step in analysis.steps:
        if step.kind == "agent":
            last_agent = step
            for call_id, tool, arguments in step.calls:
                if call_id:
                    by_call_id[call_id] = (step.index, (tool, arguments))
        elif step.kind == "result":
            if step.call_id in by_call_id:
                caller, call = by_call_id[step.call_id]
                analysis.callers[step.index] = caller
                analysis.answers[step.index] = [call]
            elif last_agent is not None:
                analysis.callers[step.index] = last_agent.index
                analysis.answers[step.index] = [c[1:] for c in last_agent.calls]
            error = error_in(step.text)
            if error:
                analysis.errors[step.index] = error
        elif step.kind == "user":
            last_agent = None


def error_in(text: str) -> str:
    """The line of a tool result that reports an error (a traceback's last exception line),
    or "" when it reports none. An exit code, where the result states one, decides."""
    head = text[:ERROR_HEAD]
    exit_code = EXIT_CODE.search(head)
    if exit_code and exit_code[1] == "0":
        return ""
    match = STRONG_ERROR.search(text) or (exit_code or WEAK_ERROR.search(head))
    if match is None:
        return ""
    exceptions = list(EXCEPTION_LINE.finditer(text))
    return _line_at(text, exceptions[-1] if exceptions else match)


def _line_at(text: str, match: re.Match[str]) -> str:
    start = text.rfind("\n", 0, match.start()) + 1
    end = text.find("\n", match.end())
    return quote(text[start : end if end != -1 else len(text)])


def quote(text: str) -> str:
    """A short, single-line excerpt of step text for a rationale."""
    text = " ".join(text[: QUOTE * 4].split())
    return text if len(text) <= QUOTE else text[: QUOTE - 1] + "…"


def _next_agent(steps: list[StepView], after: int) -> StepView | None:
    """The agent step that follows `after` with only results between, if any."""
    for step in steps[after + 1 :]:
        if step.kind == "agent":
            return step
        if step.kind != "result":
            return None
    return None


# --- the signals ------------------------------------------------------------------------------


def ignored_errors(analysis: Analysis) -> list[Signal]:
    signals = []
    for index, error in analysis.errors.items():
        reply = _next_agent(analysis.steps, index)
        if reply is None or not reply.text.strip() or ACKNOWLEDGES.search(reply.text):
            continue
        if not _identifiers(error).isdisjoint(_identifiers(reply.text)):
            continue  # it speaks of what the error named (a flight, a function, a file)
        signals.append(
            Signal(
                reply.index,
                "ignored_tool_output_or_error",
                f"step {index} reported an error ({error}) and step {reply.index} went on "
                f"without acknowledging it",
                70,
                strong=True,
                cause=analysis.callers.get(index),
            )
        )
    return signals


def _identifiers(text: str) -> set[str]:
    """Words with a digit or an underscore: ids, numbers, code names (`HAT001`, `get_user`)."""
    return {t for t in TOKEN.findall(text.lower()) if "_" in t or any(c.isdigit() for c in t)}


def _is_state_changing(tool: str) -> bool:
    words = _words(tool)
    return bool(words) and words[0] in STATE_CHANGING and not HANDOFF.match(tool)


def repeated_calls(analysis: Analysis) -> list[Signal]:
    """An identical call made again with nothing new in between (no user message, no
    state-changing call), or made again after it failed."""
    signals = []
    seen: dict[tuple[str, str], int] = {}
    failed: set[tuple[str, str]] = set()
    for step in analysis.steps:
        if step.kind == "user":
            seen = {key: index for key, index in seen.items() if key in failed}
        elif step.kind == "result" and step.index in analysis.errors:
            failed.update(analysis.answers.get(step.index, []))
        for _, tool, arguments in step.calls:
            key = (tool, arguments)
            if key in seen:
                signals.append(
                    Signal(
                        step.index,
                        "repeated_action_loop",
                        f"step {step.index} repeats the identical call {tool} of step "
                        f"{seen[key]}" + (", which had failed" if key in failed else ""),
                        60,
                        strong=False,
                        cause=seen[key],
                        repeat=True,
                    )
                )
                continue
            if _is_state_changing(tool):
                seen = {k: index for k, index in seen.items() if k in failed}
            seen[key] = step.index
    return signals


def loops(analysis: Analysis) -> list[Signal]:
    """Agent messages (with their calls) said three times or more, and A-B-A-B alternations."""
    agent_steps = [s for s in analysis.steps if s.kind == "agent" and (s.text.strip() or s.calls)]
    keys = [(s.name, " ".join(s.text.split()), tuple(c[1:] for c in s.calls)) for s in agent_steps]
    counts = Counter(keys)
    first: dict[Any, int] = {}
    signals = []
    alternating = False
    for position, (step, key) in enumerate(zip(agent_steps, keys, strict=True)):
        if key in first and counts[key] >= 3:
            signals.append(
                Signal(
                    step.index,
                    "repeated_action_loop",
                    f"step {step.index} repeats step {first[key]} ({counts[key]} times in all: "
                    f"{quote(step.text) or 'the same calls'})",
                    75,
                    strong=True,
                    cause=first[key],
                    repeat=True,
                )
            )
        first.setdefault(key, step.index)
        was_alternating = alternating
        alternating = (
            position >= 3 and key == keys[position - 2] != keys[position - 1] == keys[position - 3]
        )
        if alternating and not was_alternating:
            start, repeat = agent_steps[position - 3].index, agent_steps[position - 1].index
            signals.append(
                Signal(
                    repeat,
                    "repeated_action_loop",
                    f"steps {start}-{step.index} alternate between the same two actions",
                    75,
                    strong=True,
                    cause=start,
                    repeat=True,
                )
            )
    return signals


def premature_end(analysis: Analysis) -> list[Signal]:
    last = next((s for s in reversed(analysis.steps) if s.kind in ("agent", "result")), None)
    if last is None:
        return []
    if last.kind == "result":
        caller = analysis.callers.get(last.index)
        if caller is None:
            return []
        step, how = analysis.steps[caller], f"on the result of step {caller}'s call"
    elif last.calls:
        step, how = last, "on a tool call"
    elif not last.text.strip():
        step, how = last, "on an empty message"
    else:
        return []
    if any(HANDOFF.match(tool) for _, tool, _ in step.calls):
        return []
    return [
        Signal(
            step.index,
            "premature_termination",
            f"the run ends {how} with no final answer",
            65,
            strong=True,
        )
    ]


def unconfirmed_side_effects(analysis: Analysis) -> list[Signal]:
    steps = analysis.steps
    first_agent = next((s.index for s in steps if s.kind == "agent"), None)
    conversation = first_agent is not None and any(
        s.kind == "user" for s in steps[first_agent + 1 :]
    )
    if not conversation:
        return []
    signals = []
    latest_user: StepView | None = None
    agent_spoke = False  # an agent wrote a message since the last user message (before it)
    asked = False  # the latest user message answers an agent's message
    for step in steps:
        if step.kind == "user":
            latest_user, asked, agent_spoke = step, agent_spoke, False
            continue
        if step.kind != "agent":
            continue
        writes = [tool for _, tool, _ in step.calls if _is_state_changing(tool)]
        confirmed = (
            asked
            and latest_user is not None
            and AFFIRMATIVE.search(latest_user.text)
            and not REFUSAL.match(latest_user.text)
        )
        if writes and not confirmed:
            said = (
                f"the user's step {latest_user.index} does not confirm it"
                if latest_user
                else "no user message confirms it"
            )
            signals.append(
                Signal(
                    step.index,
                    "unconfirmed_side_effect",
                    f"step {step.index} calls {writes[0]} and {said}",
                    55,
                    strong=False,
                )
            )
        if step.text.strip():
            agent_spoke = True
    return signals


# --- the reply ----------------------------------------------------------------------------------


def _outcome(outcome: Any) -> bool | None:
    if not isinstance(outcome, dict):
        return None
    success = outcome.get("success")
    if isinstance(success, bool):
        return success
    reward = outcome.get("reward")
    if isinstance(reward, int | float) and not isinstance(reward, bool):
        if reward >= 1:
            return True
        if reward <= 0:
            return False
    return None


def _category(name: str, categories: list[str]) -> str:
    if name in categories:
        return name
    return "other" if "other" in categories else ""


def _fallback_step(analysis: Analysis) -> int | None:
    """A failure's critical step when no signal fired: the first step that acted on the world
    (a state-changing call, else the first call or code that was run), else the last agent
    message, whose claim the outcome then contradicts."""
    agents = [s for s in analysis.steps if s.kind == "agent"]
    for step in agents:
        if any(_is_state_changing(tool) for _, tool, _ in step.calls):
            return step.index
    if analysis.callers:
        return min(analysis.callers.values())
    return next((s.index for s in reversed(agents) if s.text.strip()), None)


def judge(analysis: Analysis, outcome: bool | None, categories: list[str]) -> dict[str, Any]:
    signals = analysis.signals
    first = signals[0] if signals else None
    said = {True: "success", False: "failure", None: "unknown"}[outcome]
    if outcome is False or (outcome is None and any(s.strong for s in signals)):
        verdict = "failure"
    elif signals:
        verdict = "partial"
    else:
        verdict = "success"

    if verdict == "success":
        confidence = 85 if outcome else 40
        return _reply(verdict, None, None, "", "", f"Outcome {said}; no signal fired.", confidence)
    if first is None:
        step = _fallback_step(analysis)
        rationale = (
            f"Outcome {said}; no signal fired, so the critical step is a guess: the first step "
            f"that acted (a state-changing call, else the first call run), else the last "
            f"message (step {step})."
        )
        return _reply(verdict, step, step, "", _agent(analysis, step), rationale, 25)

    root = first.step if first.cause is None else min(first.cause, first.step)
    listed = "; ".join(f"{s.category} at step {s.step}: {s.rationale}" for s in signals[:5])
    more = f" (and {len(signals) - 5} more)" if len(signals) > 5 else ""
    if verdict == "failure" and outcome is False:
        confidence = min(95, first.confidence + 15)
    elif verdict == "partial":
        confidence = first.confidence - 15
    else:
        confidence = first.confidence
    return _reply(
        verdict,
        first.step,
        root,
        _category(first.category, categories),
        _agent(analysis, first.step),
        f"Outcome {said}. Signals: {listed}{more}.",
        confidence,
    )


def _agent(analysis: Analysis, step: int | None) -> str:
    return "" if step is None else analysis.steps[step].name[:AGENT_MAX]


def _reply(
    verdict: str,
    critical: int | None,
    root: int | None,
    category: str,
    agent: str,
    rationale: str,
    confidence: int,
) -> dict[str, Any]:
    if len(rationale) > RATIONALE_MAX:
        rationale = rationale[: RATIONALE_MAX - 1] + "…"
    return {
        "verdict": verdict,
        "first_critical_step": critical,
        "root_cause_step": root,
        "error_category": category,
        "responsible_agent": agent,
        "rationale": rationale,
        "confidence": confidence,
    }


def step_labels(analysis: Analysis, critical: int | None) -> list[dict[str, Any]]:
    """A label and a score in [-10, 10] for each agent step."""
    fired: dict[int, Signal] = {}
    for signal in analysis.signals:
        fired.setdefault(signal.step, signal)
    failed_calls = {analysis.callers[r] for r in analysis.errors if r in analysis.callers}
    answered = set(analysis.callers.values())
    labels = []
    for step in analysis.steps:
        if step.kind != "agent":
            continue
        signal = fired.get(step.index)
        if signal is not None and signal.repeat:
            label, score = "no_progress", -3
        elif signal is not None:
            label, score = "regression", -(signal.confidence // 10)
        elif step.index == critical:
            label, score = "regression", -3
        elif step.index in failed_calls:
            label, score = "no_progress", -2
        elif any(_is_state_changing(tool) for _, tool, _ in step.calls):
            label, score = "progress", 6
        elif step.calls:
            label, score = "exploration", 2
        elif step.index in answered:  # code a multi-agent executor ran without error
            label, score = "progress", 4
        else:
            label, score = "progress", 3
        labels.append({"step": step.index, "label": label, "score": score})
    return labels
