"""Training and evaluating the critic on labelled trajectories, split by task so that no task
is on both sides of a comparison.

`train` holds a share of the tasks out, chooses the number of embedding components, the L2
strength and the temperature by an inner cross-validation (by task) on the rest, fits the
critic on all of the rest and measures
it on the held-out tasks: the judge evaluation's measures (workers/judging/evaluation.py: first
critical step exact / within one / within three, agent) plus calibration. The artifact is that
very model, so its stored metrics describe it exactly. `cross_validate` does the same in k
folds, for the benchmark.

The responsible agent is the agent with the most probability mass over its steps: in a
multi-agent run one agent often writes several steps near the error.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workers.critic import features
from workers.critic.encoder import Encoder
from workers.critic.model import (
    StepCritic,
    fit,
    fit_temperature,
    principal_components,
    softmax,
)
from workers.judging.evaluation import Label, evaluate

L2_GRID = (0.003, 0.01, 0.03, 0.1, 0.3)
DEFAULT_L2 = 0.03
CALIBRATION_BINS = 10


class NotEnoughLabels(ValueError):
    """Too few labelled trajectories (or tasks) to train and hold some out."""


@dataclass(frozen=True)
class Example:
    """A labelled trajectory: `key` identifies it (a trajectory id), `task` groups it."""

    key: Any
    task: str
    trajectory: dict[str, Any]  # the judges' shape: steps, task, outcome
    step: int
    agent: str = ""


@dataclass
class Encoded:
    table: features.StepTable
    vectors: np.ndarray  # (steps, dim)
    task_vector: np.ndarray  # (dim,)

    @property
    def inputs(self) -> tuple[features.StepTable, np.ndarray, np.ndarray]:
        return self.table, self.vectors, self.task_vector


@dataclass(frozen=True)
class Settings:
    encoder: str = "minilm"
    components: tuple[int, ...] = (0, 8, 32)  # step embedding components to choose from
    held_out: float = 0.2  # share of the tasks held out
    inner_folds: int = 3
    seed: int = 0


@dataclass
class Prediction:
    probabilities: np.ndarray
    names: list[str]

    @property
    def step(self) -> int:
        return int(self.probabilities.argmax())

    @property
    def confidence(self) -> float:
        return float(self.probabilities.max())

    def agent(self) -> tuple[str, float]:
        """The agent with the most probability over its steps, and that probability."""
        mass: dict[str, float] = defaultdict(float)
        for name, p in zip(self.names, self.probabilities, strict=True):
            if name:
                mass[name] += float(p)
        if not mass:
            return "", 0.0
        name = max(mass, key=lambda n: mass[n])
        return name, mass[name]


@dataclass
class TrainResult:
    critic: StepCritic
    summary: dict[str, Any]
    metrics: dict[str, Any]
    held_out: dict[Any, Prediction] = field(default_factory=dict)


def encode(trajectories: Sequence[dict[str, Any]], encoder: Encoder) -> list[Encoded]:
    """Step tables and vectors of many trajectories, with one call to the encoder."""
    return embed([features.read(t) for t in trajectories], encoder)


def embed(tables: Sequence[features.StepTable], encoder: Encoder) -> list[Encoded]:
    texts = [text for table in tables for text in [*table.texts, table.instruction]]
    vectors = encoder.encode(texts)
    out, at = [], 0
    for table in tables:
        count = len(table.texts)
        out.append(Encoded(table, vectors[at : at + count], vectors[at + count]))
        at += count + 1
    return out


def predict(critic: StepCritic, encoded: Sequence[Encoded]) -> list[Prediction]:
    return [Prediction(critic.probabilities(*e.inputs), e.table.names) for e in encoded]


def task_folds(tasks: Sequence[str], folds: int, seed: int) -> list[list[int]]:
    """Indices of the examples in each fold; every task's examples in one fold."""
    distinct = sorted(set(tasks))
    random.Random(seed).shuffle(distinct)
    fold_of = {task: i % folds for i, task in enumerate(distinct)}
    out: list[list[int]] = [[] for _ in range(folds)]
    for index, task in enumerate(tasks):
        out[fold_of[task]].append(index)
    return out


def split_by_task(tasks: Sequence[str], held_out: float, seed: int) -> tuple[list[int], list[int]]:
    distinct = sorted(set(tasks))
    if len(distinct) < 2:
        raise NotEnoughLabels(
            f"the labelled trajectories come from {len(distinct)} task(s); at least 2 are "
            "needed to hold one out"
        )
    random.Random(seed).shuffle(distinct)
    count = min(len(distinct) - 1, max(1, round(held_out * len(distinct))))
    test_tasks = set(distinct[:count])
    test = [i for i, task in enumerate(tasks) if task in test_tasks]
    train = [i for i, task in enumerate(tasks) if task not in test_tasks]
    return train, test


def _log_loss(predictions: Sequence[Prediction], targets: Sequence[int]) -> float:
    losses = [
        -math.log(max(float(p.probabilities[t]), 1e-12))
        for p, t in zip(predictions, targets, strict=True)
    ]
    return sum(losses) / len(losses)


def fit_critic(
    encoded: Sequence[Encoded], targets: Sequence[int], tasks: Sequence[str], settings: Settings
) -> tuple[StepCritic, dict[str, Any]]:
    """A critic whose embedding components, L2 strength and temperature are chosen by inner
    cross-validation by task (defaults when there are too few tasks for it), then fitted on
    all of `encoded`. The projection is fitted once, on all of `encoded`: it uses no labels,
    and fewer components are a prefix of more."""
    mean, directions = principal_components(
        np.concatenate([e.vectors for e in encoded]), max(settings.components)
    )

    def fitted(indices: Sequence[int], components: int, l2: float) -> StepCritic:
        return fit(
            settings.encoder,
            [encoded[i].table for i in indices],
            [encoded[i].vectors for i in indices],
            [encoded[i].task_vector for i in indices],
            [targets[i] for i in indices],
            (mean, directions[:components]),
            l2,
        )

    folds = min(settings.inner_folds, len(set(tasks)))
    components, l2 = settings.components[0], DEFAULT_L2
    temperature, chosen_by = 1.0, "defaults (too few tasks for an inner split)"
    if folds >= 2:
        best = math.inf
        parts = task_folds(tasks, folds, settings.seed + 1)
        order = [i for part in parts for i in part]
        for candidate in itertools.product(settings.components, L2_GRID):
            scores: list[np.ndarray] = []
            for part in parts:
                held = set(part)
                critic = fitted([i for i in range(len(encoded)) if i not in held], *candidate)
                scores += [critic.scores(*encoded[i].inputs) for i in part]
            ordered = [targets[i] for i in order]
            t = fit_temperature(scores, ordered)
            loss = _log_loss([Prediction(softmax(s / t), []) for s in scores], ordered)
            if loss < best:
                best, (components, l2), temperature = loss, candidate, t
        chosen_by = f"{folds}-fold cross-validation by task (out-of-fold log-loss {best:.3f})"
    critic = fitted(range(len(encoded)), components, l2)
    critic.temperature = temperature
    return critic, {
        "components": len(critic.pca_components),
        "l2": l2,
        "temperature": round(temperature, 4),
        "chosen_by": chosen_by,
    }


def calibration(predictions: Sequence[Prediction], targets: Sequence[int]) -> dict[str, float]:
    """Expected calibration error of the top step's probability (10 equal-width bins), the
    mean confidence, the exact-step accuracy it should match, and the log-loss."""
    confidences = np.array([p.confidence for p in predictions])
    correct = np.array([p.step == t for p, t in zip(predictions, targets, strict=True)], float)
    bins = np.minimum((confidences * CALIBRATION_BINS).astype(int), CALIBRATION_BINS - 1)
    ece = sum(
        abs(confidences[bins == b].mean() - correct[bins == b].mean()) * (bins == b).sum()
        for b in range(CALIBRATION_BINS)
        if (bins == b).any()
    ) / len(predictions)
    return {
        "ece": float(ece),
        "mean_confidence": float(confidences.mean()),
        "accuracy": float(correct.mean()),
        "log_loss": _log_loss(predictions, targets),
    }


def measure(predictions: dict[Any, Prediction], examples: Sequence[Example]) -> dict[str, Any]:
    """The judge evaluation's step and agent measures, and calibration, on these examples."""
    reference = {e.key: Label("failure", e.step, "", e.agent) for e in examples}
    judged = {key: Label("", p.step, "", p.agent()[0]) for key, p in predictions.items()}
    report = evaluate(judged, reference)
    return {
        "n": report.n,
        "step_exact": report.step_exact.as_dict(),
        "step_within_one": report.step_within_one.as_dict(),
        "step_within_three": report.step_within_three.as_dict(),
        "agent": report.agent.as_dict(),
        "calibration": calibration(
            [predictions[e.key] for e in examples], [e.step for e in examples]
        ),
    }


def usable(examples: Sequence[Example]) -> list[Example]:
    """The examples whose labelled step lies inside the trajectory."""
    return [e for e in examples if 0 <= e.step < len(e.trajectory.get("steps") or [])]


def summary(examples: Sequence[Example], train: Sequence[int], test: Sequence[int]) -> dict:
    steps = [len(e.trajectory["steps"]) for e in examples]
    positions: dict[str, int] = defaultdict(int)
    for e in examples:
        positions[str(e.step) if e.step < 10 else "10+"] += 1
    return {
        "trajectories": len(examples),
        "tasks": len({e.task for e in examples}),
        "steps": sum(steps),
        "mean_steps": sum(steps) / len(steps),
        "with_agent": sum(bool(e.agent) for e in examples),
        "critical_steps": dict(sorted(positions.items(), key=lambda kv: (len(kv[0]), kv[0]))),
        "train": {"trajectories": len(train), "tasks": len({examples[i].task for i in train})},
        "held_out": {"trajectories": len(test), "tasks": len({examples[i].task for i in test})},
    }


def train(examples: Sequence[Example], encoder: Encoder, settings: Settings) -> TrainResult:
    """Train on all but the held-out tasks and measure on those. Raises NotEnoughLabels."""
    given = len(examples)
    examples = usable(examples)
    if len(examples) < 2:
        raise NotEnoughLabels(
            f"{len(examples)} labelled trajectory(ies) with a first critical step; at least 2 "
            "(from 2 tasks) are needed"
        )
    tasks = [e.task for e in examples]
    train_idx, test_idx = split_by_task(tasks, settings.held_out, settings.seed)
    started = time.perf_counter()
    encoded = encode([e.trajectory for e in examples], encoder)
    encoded_s = time.perf_counter() - started
    critic, chosen = fit_critic(
        [encoded[i] for i in train_idx],
        [examples[i].step for i in train_idx],
        [tasks[i] for i in train_idx],
        settings,
    )
    fitted_s = time.perf_counter() - started - encoded_s
    test = [examples[i] for i in test_idx]
    predictions = dict(
        zip([e.key for e in test], predict(critic, [encoded[i] for i in test_idx]), strict=True)
    )
    about = summary(examples, train_idx, test_idx)
    about.update(
        encoder=settings.encoder,
        seed=settings.seed,
        skipped_out_of_range=given - len(examples),
        seconds={"encode": round(encoded_s, 3), "fit": round(fitted_s, 3)},
        **chosen,
    )
    return TrainResult(critic, about, measure(predictions, test), predictions)


def cross_validate(
    examples: Sequence[Example], encoder: Encoder, settings: Settings, folds: int = 5
) -> tuple[dict[Any, Prediction], dict[str, float]]:
    """Out-of-fold predictions for every example (k folds by task) and timings: fitting
    seconds per fold, scoring seconds per trajectory (features, cached embeddings, model)."""
    examples = usable(examples)
    tasks = [e.task for e in examples]
    encoded = encode([e.trajectory for e in examples], encoder)
    out: dict[Any, Prediction] = {}
    fit_s = score_s = 0.0
    for part in task_folds(tasks, folds, settings.seed):
        held = set(part)
        rest = [i for i in range(len(examples)) if i not in held]
        started = time.perf_counter()
        critic, _ = fit_critic(
            [encoded[i] for i in rest],
            [examples[i].step for i in rest],
            [tasks[i] for i in rest],
            settings,
        )
        fit_s += time.perf_counter() - started
        started = time.perf_counter()
        again = encode([examples[i].trajectory for i in part], encoder)
        for i, prediction in zip(part, predict(critic, again), strict=True):
            out[examples[i].key] = prediction
        score_s += time.perf_counter() - started
    return out, {"fit_s_per_fold": fit_s / folds, "score_s_per_trajectory": score_s / len(out)}
