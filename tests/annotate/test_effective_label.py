"""The effective label: each field from the best source that has it (DESIGN.md section 3)."""

from __future__ import annotations

from django.contrib.auth.models import User

from annotate.effective import refresh
from annotate.models import Adjudication, Annotation, EffectiveLabel
from curation.formats.reading import RawItem
from curation.ingest import import_items
from curation.models import Project, Trajectory

STEPS = [{"role": "user", "content": "hi"}] + [
    {"role": "assistant", "content": f"step {n}"} for n in range(1, 6)
]


def imported(project: Project, success: bool | None = None, labels: dict | None = None):
    record = {"id": "r1", "steps": STEPS, "outcome": {"success": success}}
    if labels:
        record["labels"] = labels
    import_items(project, [RawItem("test", "item 0", record)])
    return Trajectory.objects.get(project=project)


def annotate(trajectory, source: str, name: str = "", **fields) -> Annotation:
    author = User.objects.create_user(name) if source == Annotation.Source.HUMAN else None
    return Annotation.objects.create(
        trajectory=trajectory, source=source, author=author, source_name=name, **fields
    )


def label_of(trajectory) -> EffectiveLabel:
    refresh([trajectory.pk])
    return EffectiveLabel.objects.get(trajectory=trajectory)


def test_an_import_gives_every_run_its_effective_label(project: Project) -> None:
    trajectory = imported(project, success=False)
    label = EffectiveLabel.objects.get(trajectory=trajectory)
    assert (label.verdict, label.verdict_source) == ("failure", "outcome")
    assert label.first_critical_step is None and not label.has_human


def test_a_gold_label_counts_as_human_and_outranks_the_outcome(project: Project) -> None:
    gold = {"verdict": "partial", "first_critical_step": 3, "category": "wrong_tool"}
    label = EffectiveLabel.objects.get(trajectory=imported(project, False, gold))
    assert (label.verdict, label.verdict_source) == ("partial", "human")
    assert (label.first_critical_step, label.first_critical_step_source) == (3, "human")
    assert (label.error_category, label.has_human) == ("wrong_tool", True)


def test_a_verified_failure_takes_its_critical_step_from_a_judge(project: Project) -> None:
    trajectory = imported(project, success=False)
    annotate(trajectory, "judge", "j1", verdict="success", first_critical_step=4)
    label = label_of(trajectory)
    assert (label.verdict, label.verdict_source) == ("failure", "outcome")
    assert (label.first_critical_step, label.first_critical_step_source) == (4, "judge")


def test_agreeing_humans_outrank_a_single_human_and_judges(project: Project) -> None:
    trajectory = imported(project)
    annotate(trajectory, "human", "ann", verdict="failure", first_critical_step=2)
    annotate(trajectory, "human", "bob", verdict="failure", first_critical_step=2)
    annotate(trajectory, "judge", "j1", verdict="failure", first_critical_step=5)
    label = label_of(trajectory)
    assert (label.first_critical_step, label.first_critical_step_source) == (2, "humans_agree")
    assert label.judge_disagrees and not label.humans_disagree


def test_humans_split_without_a_majority_give_way_and_are_flagged(project: Project) -> None:
    trajectory = imported(project)
    annotate(trajectory, "human", "ann", verdict="failure", first_critical_step=2)
    annotate(trajectory, "human", "bob", verdict="failure", first_critical_step=4)
    annotate(trajectory, "heuristic", "heuristic", first_critical_step=1)
    label = label_of(trajectory)
    assert (label.verdict, label.verdict_source) == ("failure", "humans_agree")
    assert (label.first_critical_step, label.first_critical_step_source) == (1, "heuristic")
    assert label.humans_disagree


def test_an_adjudication_outranks_everything(project: Project) -> None:
    trajectory = imported(project, success=True)
    annotate(trajectory, "human", "ann", verdict="success")
    Adjudication.objects.create(trajectory=trajectory, verdict="failure", first_critical_step=3)
    label = label_of(trajectory)
    assert (label.verdict, label.verdict_source) == ("failure", "adjudicated")
    assert (label.first_critical_step, label.first_critical_step_source) == (3, "adjudicated")


def test_a_judge_panel_takes_the_majority_and_a_tie_decides_nothing(project: Project) -> None:
    trajectory = imported(project)
    for n, verdict in enumerate(["success", "failure", "failure"]):
        annotate(trajectory, "judge", f"j{n}", verdict=verdict)
    label = label_of(trajectory)
    assert (label.verdict, label.verdict_source) == ("failure", "judge_panel")
    annotate(trajectory, "judge", "j3", verdict="success")
    label = label_of(trajectory)
    assert (label.verdict, label.verdict_source) == ("", "")


def test_drafts_do_not_count(project: Project) -> None:
    trajectory = imported(project)
    annotate(trajectory, "human", "ann", verdict="failure", status="draft")
    label = label_of(trajectory)
    assert label.verdict == "" and not label.has_human
