"""What the critic sees of each step: a text to embed, and structural features read with the
heuristic judge's own analysis (workers/backends/heuristic.py) so both judges agree on what a
tool error, a repeated call or a loop is.

Structural features of step k (all in [0, 1] or small counts; trajectory-wide constants are
left out: the critic compares the steps of one trajectory, where they would cancel):

- kind: system, user, agent or tool result (a code runner's reply counts as a result);
- position: index bins 0, 1, 2, 3, 4, 5-7, 8+; relative position; last step;
- the step: log length, code block, tool calls, the agent's first turn, a reviewer-like
  agent name (verify/validate/check/review/test);
- tool errors: the result right after reports an error; this result reports one; an error
  was reported just before (the step reacts to it);
- the heuristic's signals firing at the step (one per rule), the step being a signal's cause,
  and the step the heuristic would name as the first critical one.

Embedding features come later (`model.embedding_features`): they need the encoder.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from workers.backends import heuristic

KINDS = ("system", "user", "agent", "result")
POSITION_BINS = ((0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 7), (8, None))
SIGNALS = (
    "ignored_tool_output_or_error",
    "repeated_action_loop",
    "premature_termination",
    "unconfirmed_side_effect",
)
REVIEWER = re.compile(r"verif|valid|check|review|test|critic", re.IGNORECASE)
CODE = re.compile(r"```|^\s*(?:def|import|from \w+ import|class) ", re.MULTILINE)
TEXT_HEAD = 700  # characters of a step embedded from its start ...
TEXT_TAIL = 300  # ... and from its end (the encoder reads 256 tokens at most)

STRUCTURAL = (
    *(f"kind_{k}" for k in KINDS),
    *(f"index_{lo}" if lo == hi else f"index_{lo}_{hi or 'up'}" for lo, hi in POSITION_BINS),
    "relative_position",
    "last_step",
    "log_length",
    "code",
    "tool_calls",
    "agent_first_turn",
    "reviewer_agent",
    "next_result_error",
    "result_error",
    "after_error",
    *(f"signal_{s}" for s in SIGNALS),
    "signal_cause",
    "heuristic_pick",
)


@dataclass
class StepTable:
    """One trajectory as the critic reads it."""

    texts: list[str]  # one per step, for the encoder
    instruction: str
    names: list[str]  # the agent of each step ("" for users, tools and unnamed agents)
    structural: np.ndarray  # (steps, len(STRUCTURAL))


def step_text(name: str, text: str) -> str:
    text = " ".join(text.split())
    if len(text) > TEXT_HEAD + TEXT_TAIL:
        text = f"{text[:TEXT_HEAD]} … {text[-TEXT_TAIL:]}"
    return f"{name}: {text}" if name else text


def _bin(index: int) -> int:
    for position, (low, high) in enumerate(POSITION_BINS):
        if index >= low and (high is None or index <= high):
            return position
    raise ValueError(index)  # pragma: no cover - the last bin is open-ended


def read(trajectory: dict[str, Any]) -> StepTable:
    """The step table of a trajectory in the judges' shape (`runs.payloads`, a backend
    request's `context.trajectory`). Raises heuristic.ContextError on malformed steps."""
    raw_steps = trajectory.get("steps")
    if not isinstance(raw_steps, list) or not raw_steps:
        raise heuristic.ContextError("the trajectory has no steps")
    analysis = heuristic.analyse(raw_steps)
    steps = analysis.steps
    count = len(steps)
    table = np.zeros((count, len(STRUCTURAL)), np.float32)
    column = {name: i for i, name in enumerate(STRUCTURAL)}
    pick = heuristic.judge(analysis, False, []).get("first_critical_step")
    fired: dict[int, set[str]] = {}
    causes: set[int] = set()
    for signal in analysis.signals:
        fired.setdefault(signal.step, set()).add(signal.category)
        if signal.cause is not None:
            causes.add(signal.cause)
    seen_agents: set[str] = set()
    names = []
    for step in steps:
        k = step.index
        row = table[k]
        row[column[f"kind_{step.kind}"]] = 1
        row[len(KINDS) + _bin(k)] = 1
        row[column["relative_position"]] = k / (count - 1) if count > 1 else 0.0
        row[column["last_step"]] = k == count - 1
        row[column["log_length"]] = math.log1p(len(step.text)) / 10
        row[column["code"]] = bool(CODE.search(step.text))
        row[column["tool_calls"]] = bool(step.calls)
        if step.kind == "agent":
            row[column["agent_first_turn"]] = step.name not in seen_agents
            row[column["reviewer_agent"]] = bool(REVIEWER.search(step.name))
            seen_agents.add(step.name)
        following = steps[k + 1] if k + 1 < count else None
        if following is not None and following.kind == "result":
            row[column["next_result_error"]] = following.index in analysis.errors
        row[column["result_error"]] = k in analysis.errors
        row[column["after_error"]] = k > 0 and (k - 1) in analysis.errors
        for category in fired.get(k, ()):
            row[column[f"signal_{category}"]] = 1
        row[column["signal_cause"]] = k in causes
        row[column["heuristic_pick"]] = k == pick
        # As recorded (a code runner keeps its name: gold labels can blame it); users none.
        raw_name = raw_steps[k].get("name")
        names.append(raw_name.strip() if isinstance(raw_name, str) and step.kind != "user" else "")
    texts = [step_text(name, s.text) for name, s in zip(names, steps, strict=True)]
    task = trajectory.get("task") if isinstance(trajectory.get("task"), dict) else {}
    instruction = task.get("instruction") if isinstance(task.get("instruction"), str) else ""
    return StepTable(texts, step_text("", instruction), names, table)
