"""How well a judge's labels match reference labels (gold, human or adjudicated): pure
functions over plain records. `evaluate_judge --json` prints `JudgeEvaluation.as_dict()`.

Only items both sides labelled are compared, and each measure counts the items where the
reference gives what it measures:

- verdict: items whose reference has a verdict. Accuracy, Cohen's kappa and the confusion
  matrix (rows: the reference's verdicts, columns: the judge's).
- first critical step: items whose reference names a step; a judge that names none is wrong.
  Exact, within one step, within three steps.
- agent: items whose reference names a step and an agent; names compared ignoring case and
  surrounding spaces.
- category: items whose reference names a category; a judge that names none is wrong.

Every rate (and the kappa) comes with a percentile bootstrap 95% interval over 1000
resamples of its items, drawn from a fixed seed so the same labels give the same report.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from annotate.agreement import cohen_kappa

RESAMPLES = 1000
SEED = 20240917
T = TypeVar("T")


@dataclass(frozen=True)
class Label:
    """One side's label of one item. `agent` names the agent who wrote the critical step ("" in
    single-agent runs)."""

    verdict: str = ""
    critical_step: int | None = None
    category: str = ""
    agent: str = ""


@dataclass(frozen=True)
class Interval:
    low: float | None
    high: float | None


@dataclass(frozen=True)
class Rate:
    """`correct` of `n` items agree; `interval` is the bootstrap 95% interval of the rate."""

    correct: int
    n: int
    interval: Interval

    @property
    def value(self) -> float | None:
        return self.correct / self.n if self.n else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "correct": self.correct,
            "n": self.n,
            "rate": self.value,
            "low": self.interval.low,
            "high": self.interval.high,
        }


@dataclass(frozen=True)
class JudgeEvaluation:
    n: int  # items both sides labelled
    verdict: Rate
    kappa: float | None
    kappa_interval: Interval
    confusion_labels: list[str]
    confusion: list[list[int]]  # confusion[i][j]: reference said labels[i], the judge labels[j]
    step_exact: Rate
    step_within_one: Rate
    step_within_three: Rate
    agent: Rate
    category: Rate

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "verdict": {
                "accuracy": self.verdict.as_dict(),
                "kappa": self.kappa,
                "kappa_low": self.kappa_interval.low,
                "kappa_high": self.kappa_interval.high,
                "confusion": {
                    "labels": self.confusion_labels,
                    "counts": self.confusion,
                    "rows": "reference",
                    "columns": "judge",
                },
            },
            "first_critical_step": {
                "exact": self.step_exact.as_dict(),
                "within_one": self.step_within_one.as_dict(),
                "within_three": self.step_within_three.as_dict(),
            },
            "agent": self.agent.as_dict(),
            "category": self.category.as_dict(),
        }


def bootstrap(values: Sequence[T], statistic: Callable[[Sequence[T]], float | None]) -> Interval:
    """The percentile bootstrap 95% interval of `statistic` over `values`: RESAMPLES
    resamples with replacement, from a fixed seed. Resamples where the statistic is undefined
    (None) are left out; None bounds when fewer than two remain."""
    if not values:
        return Interval(None, None)
    rng = random.Random(SEED)
    estimates = []
    for _ in range(RESAMPLES):
        estimate = statistic(rng.choices(values, k=len(values)))
        if estimate is not None:
            estimates.append(estimate)
    if len(estimates) < 2:
        return Interval(None, None)
    cuts = statistics.quantiles(estimates, n=40, method="inclusive")  # 2.5% steps
    return Interval(cuts[0], cuts[-1])


def _mean(values: Sequence[bool]) -> float:
    return sum(values) / len(values)


def rate(outcomes: Sequence[bool]) -> Rate:
    return Rate(sum(outcomes), len(outcomes), bootstrap(outcomes, _mean))


def _kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    return cohen_kappa(pairs).kappa


def _same_agent(reference: str, judge: str) -> bool:
    return reference.strip().casefold() == judge.strip().casefold()


def evaluate(judge: Mapping[Any, Label], reference: Mapping[Any, Label]) -> JudgeEvaluation:
    """The judge's labels against the reference's, on the items both labelled."""
    items = sorted(judge.keys() & reference.keys(), key=repr)
    pairs = [(reference[item], judge[item]) for item in items]
    verdicts = [(ref.verdict, got.verdict) for ref, got in pairs if ref.verdict]
    stepped = [(ref, got) for ref, got in pairs if ref.critical_step is not None]
    distances = [
        None if got.critical_step is None else abs(got.critical_step - ref.critical_step)
        for ref, got in stepped
    ]
    kappa = cohen_kappa(verdicts)
    return JudgeEvaluation(
        n=len(items),
        verdict=rate([ref == got for ref, got in verdicts]),
        kappa=kappa.kappa,
        kappa_interval=bootstrap(verdicts, _kappa),
        confusion_labels=kappa.labels,
        confusion=kappa.counts,
        step_exact=rate([d == 0 for d in distances]),
        step_within_one=rate([d is not None and d <= 1 for d in distances]),
        step_within_three=rate([d is not None and d <= 3 for d in distances]),
        agent=rate(
            [_same_agent(ref.agent, got.agent) for ref, got in stepped if ref.agent.strip()]
        ),
        category=rate([ref.category == got.category for ref, got in pairs if ref.category]),
    )
