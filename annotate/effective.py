"""The effective label of a trajectory (DESIGN.md section 3), field by field.

Sources rank: adjudication > agreeing humans > single human (gold labels count as human) >
the run's own verified outcome (verdict only) > judge panel > single judge > heuristic. Each
field takes the best source that has it, so a verified failure can take its critical step
from a judge. Humans who disagree with no strict majority give way to the next source (and
the trajectory is flagged for adjudication).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from annotate.models import Adjudication, Annotation, EffectiveLabel
from curation.models import Trajectory

FIELDS = ("verdict", "first_critical_step", "root_cause_step", "error_category")
COMPARED = ("verdict", "first_critical_step", "error_category")
Source = EffectiveLabel.Source
HUMAN_SOURCES = {Annotation.Source.GOLD, Annotation.Source.HUMAN}


def _given(judgements: Sequence[Any], field: str) -> list[Any]:
    return [v for j in judgements if (v := getattr(j, field)) not in ("", None)]


def _majority(values: list[Any]) -> Any | None:
    """The value more than half of `values` agree on, if any."""
    if not values:
        return None
    value, count = Counter(values).most_common(1)[0]
    return value if count * 2 > len(values) else None


def _pick(
    field: str,
    success: bool | None,
    adjudication: Adjudication | None,
    humans: list[Annotation],
    judges: list[Annotation],
    heuristics: list[Annotation],
) -> tuple[Any, str]:
    if adjudication is not None and getattr(adjudication, field) not in ("", None):
        return getattr(adjudication, field), Source.ADJUDICATED
    said = _given(humans, field)
    if len(said) == 1:
        return said[0], Source.HUMAN
    if said and len(set(said)) == 1:
        return said[0], Source.HUMANS_AGREE
    if (value := _majority(said)) is not None:
        return value, Source.HUMAN
    if field == "verdict" and success is not None:
        return ("success" if success else "failure"), Source.OUTCOME
    said = _given(judges, field)
    if len(said) == 1:
        return said[0], Source.JUDGE
    if (value := _majority(said)) is not None:
        return value, Source.JUDGE_PANEL
    said = _given(heuristics, field)
    if said:
        return said[0], Source.HEURISTIC
    return ("" if field in ("verdict", "error_category") else None), ""


def compute(
    success: bool | None, annotations: Iterable[Annotation], adjudication: Adjudication | None
) -> dict[str, Any]:
    """The effective label's fields from a trajectory's submitted annotations."""
    submitted = [a for a in annotations if a.status == Annotation.Status.SUBMITTED]
    humans = [a for a in submitted if a.source in HUMAN_SOURCES]
    judges = [a for a in submitted if a.source == Annotation.Source.JUDGE]
    heuristics = [a for a in submitted if a.source == Annotation.Source.HEURISTIC]
    label: dict[str, Any] = {}
    for field in FIELDS:
        label[field], label[f"{field}_source"] = _pick(
            field, success, adjudication, humans, judges, heuristics
        )
    label["has_human"] = bool(humans)
    label["humans_disagree"] = any(len(set(_given(humans, f))) > 1 for f in COMPARED)
    label["judge_disagrees"] = bool(humans) and any(
        label[f] not in ("", None) and any(v != label[f] for v in _given(judges, f))
        for f in ("verdict", "first_critical_step")
    )
    return label


def create_for_new(
    trajectory_ids: list[int], successes: list[bool | None], annotations: dict
) -> int:
    """Effective labels of freshly imported trajectories, from what the import already holds
    (`annotations`: unsaved gold annotations by trajectory id): no query needed."""
    rows = [
        EffectiveLabel(trajectory_id=pk, **compute(success, annotations.get(pk, ()), None))
        for pk, success in zip(trajectory_ids, successes, strict=True)
    ]
    EffectiveLabel.objects.bulk_create(rows)
    return len(rows)


def refresh(trajectory_ids: Iterable[int], chunk: int = 1000) -> None:
    """Recompute and store the effective labels of these trajectories."""
    ids = sorted(set(trajectory_ids))
    update = [f.name for f in EffectiveLabel._meta.fields if f.name != "trajectory"]
    for start in range(0, len(ids), chunk):
        part = ids[start : start + chunk]
        successes = dict(Trajectory.objects.filter(pk__in=part).values_list("pk", "success"))
        by_trajectory: dict[int, list[Annotation]] = defaultdict(list)
        for annotation in Annotation.objects.filter(trajectory_id__in=part):
            by_trajectory[annotation.trajectory_id].append(annotation)
        adjudications = {
            a.trajectory_id: a for a in Adjudication.objects.filter(trajectory_id__in=part)
        }
        rows = [
            EffectiveLabel(
                trajectory_id=pk,
                **compute(success, by_trajectory[pk], adjudications.get(pk)),
            )
            for pk, success in successes.items()
        ]
        EffectiveLabel.objects.bulk_create(
            rows, update_conflicts=True, unique_fields=["trajectory"], update_fields=update
        )
