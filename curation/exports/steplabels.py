"""Good/bad labels of single steps, for the stepwise kind.

Explicit labels come from step scores (people, judges, reward models) and from the per-step
labels in people's annotations. A label counts as good when it is progress or exploration,
bad when it is no_progress, regression or error; a score alone is good when it is at least the
export's `step_threshold`. Per step, the best source that has one wins (human > judge >
reward model); when that source contradicts itself the step has no explicit label.
Without one, a step's label comes from the run's effective label: every step of a success is
good; before the first critical step good, at it bad.
"""

from __future__ import annotations

from collections import defaultdict

from curation.exports.reading import Run
from curation.models import Trajectory

GOOD = frozenset({"progress", "exploration"})
BAD = frozenset({"no_progress", "regression", "error"})
SOURCES = ("human", "judge", "reward_model")
HUMAN_ANNOTATIONS = ("human", "gold")

Votes = dict[int, dict[int, dict[str, set[bool]]]]  # run, step, source: labels given


def _model(name: str) -> type:
    return Trajectory._meta.get_field(name).related_model


def _good(label: str, score: float | None, threshold: float) -> bool | None:
    if label in GOOD or label in BAD:
        return label in GOOD
    return None if score is None else score >= threshold


def _votes(ids: list[int], threshold: float) -> Votes:
    votes: Votes = defaultdict(lambda: defaultdict(lambda: defaultdict(set)))
    scores = _model("step_scores").objects.filter(trajectory_id__in=ids)
    for run, step, source, label, score in scores.values_list(
        "trajectory_id", "step_index", "source", "label", "score"
    ):
        if (good := _good(label, score, threshold)) is not None:
            votes[run][step][source].add(good)
    annotations = _model("annotations").objects.filter(
        trajectory_id__in=ids, status="submitted", source__in=HUMAN_ANNOTATIONS
    )
    for run, labels in annotations.values_list("trajectory_id", "step_labels"):
        for step, label in (labels or {}).items():
            if str(step).isdigit() and (good := _good(label, None, threshold)) is not None:
                votes[run][int(step)]["human"].add(good)
    return votes


def explicit_labels(ids: list[int], threshold: float) -> dict[int, dict[int, bool]]:
    """Explicit step labels of these runs: {run: {step index: good}} (two queries)."""
    out: dict[int, dict[int, bool]] = defaultdict(dict)
    for run, steps in _votes(ids, threshold).items():
        for step, by_source in steps.items():
            best = next((by_source[s] for s in SOURCES if by_source.get(s)), set())
            if len(best) == 1:
                out[run][step] = next(iter(best))
    return out


def derived_label(run: Run, index: int) -> bool | None:
    """A step's label from the run's effective label, when it gives one."""
    if run.verdict == "success":
        return True
    if run.critical_step is None:
        return None
    return index < run.critical_step if index <= run.critical_step else None
