"""evaluate_judge and the evaluation page: the heuristic judge against Who&When's gold labels
(all 126, checked against a computation straight from the files), panels, references."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from annotate import effective
from annotate.models import Adjudication, Annotation
from curation.models import Membership, Project, Trajectory
from tests.annotate.helpers import client_for, make_member, make_trajectory
from tests.curation.helpers import run_import
from workers.judging import runs
from workers.models import JudgeConfig, JudgePanel

WHO_AND_WHEN = Path("who-and-when") / "algorithm-generated"


def evaluate(**options) -> dict:
    out = io.StringIO()
    call_command("evaluate_judge", json=True, stdout=out, **options)
    return json.loads(out.getvalue())


@pytest.mark.shared_data
@pytest.mark.django_db
def test_the_heuristic_against_who_and_when_gold_matches_a_direct_count(shared_data) -> None:
    folder = shared_data / WHO_AND_WHEN
    code, summary = run_import(folder, project="ww")
    assert code == 0 and summary["created"] == 126
    call_command("judge", config="heuristic", project="ww", here=True, stdout=io.StringIO())

    result = evaluate(project="ww", judge="heuristic", against="gold")

    project = Project.objects.get(slug="ww")
    judged = {
        a.trajectory.external_id: a
        for a in Annotation.objects.filter(
            trajectory__project=project, source="heuristic"
        ).select_related("trajectory")
    }
    assert len(judged) == 126
    exact = one = three = agent = verdict = 0
    for path in sorted(folder.glob("*.json")):
        raw = json.loads(path.read_text())
        got = judged[path.stem]
        gold_step = int(raw["mistake_step"])
        verdict += got.verdict == "failure"
        if got.first_critical_step is not None:
            distance = abs(got.first_critical_step - gold_step)
            exact, one, three = (
                exact + (distance == 0),
                one + (distance <= 1),
                three + (distance <= 3),
            )
            name = raw["history"][got.first_critical_step]["name"]
            agent += name.strip().casefold() == raw["mistake_agent"].strip().casefold()

    assert result["n"] == 126 and result["judged"] == 126 and result["referenced"] == 126
    steps = result["first_critical_step"]
    assert (steps["exact"]["correct"], steps["exact"]["n"]) == (exact, 126)
    assert steps["within_one"]["correct"] == one
    assert steps["within_three"]["correct"] == three
    assert (result["agent"]["correct"], result["agent"]["n"]) == (agent, 126)
    assert (result["verdict"]["accuracy"]["correct"], result["verdict"]["accuracy"]["n"]) == (
        verdict,
        126,
    )
    low, high = steps["exact"]["low"], steps["exact"]["high"]
    assert low <= exact / 126 <= high


STEPS = [
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": "a", "name": "planner"},
    {"role": "assistant", "content": "b", "name": "coder"},
    {"role": "assistant", "content": "c", "name": "coder"},
]


def judge_says(config: JudgeConfig, trajectory: Trajectory, verdict: str, step: int | None) -> None:
    version = runs.current_version(config)
    Annotation.objects.create(
        trajectory=trajectory,
        source="judge",
        source_name=version.label,
        verdict=verdict,
        first_critical_step=step,
    )


@pytest.mark.django_db
def test_a_panel_votes_by_majority_and_reports_ties(project) -> None:
    configs = [
        JudgeConfig.objects.create(project=project, name=n, backend="openai", model="m")
        for n in ("a", "b", "c")
    ]
    panel = JudgePanel.objects.create(project=project, name="trio")
    panel.members.set(configs)
    one, two = (make_trajectory(project, STEPS) for _ in range(2))
    for config, verdict, step in zip(
        configs, ["failure", "failure", "success"], [2, 2, None], strict=True
    ):
        judge_says(config, one, verdict, step)
    judge_says(configs[0], two, "failure", 1)
    judge_says(configs[1], two, "success", None)
    for t in (one, two):
        Annotation.objects.create(
            trajectory=t, source="gold", source_name="g", verdict="failure", first_critical_step=2
        )

    result = evaluate(project="demo", judge="trio", against="gold")

    assert result["judge"] == "panel trio" and result["panel_ties"] == 1
    assert result["verdict"]["accuracy"]["correct"] == 1  # the tie gives no verdict
    assert result["first_critical_step"]["exact"]["correct"] == 1
    # the agent of a label is the name of the step it names: coder (step 2), planner (step 1)
    assert (result["agent"]["correct"], result["agent"]["n"]) == (1, 2)


@pytest.mark.django_db
def test_humans_and_adjudications_are_references_too(project) -> None:
    config = JudgeConfig.objects.create(project=project, name="j", backend="openai", model="m")
    one, two = (make_trajectory(project, STEPS) for _ in range(2))
    judge_says(config, one, "failure", 3)
    judge_says(config, two, "success", None)
    for name, verdict in (("ann", "failure"), ("bob", "failure"), ("cy", "success")):
        user = make_member(project, name)
        Annotation.objects.create(
            trajectory=one, source="human", author=user, verdict=verdict, first_critical_step=3
        )
    Adjudication.objects.create(trajectory=two, verdict="failure", first_critical_step=1)
    effective.refresh([one.pk, two.pk])

    humans = evaluate(project="demo", judge="j", against="humans")
    assert humans["n"] == 1 and humans["verdict"]["accuracy"]["correct"] == 1
    assert humans["first_critical_step"]["exact"]["correct"] == 1

    adjudicated = evaluate(project="demo", judge="j", against="adjudicated")
    assert adjudicated["n"] == 1 and adjudicated["verdict"]["accuracy"]["correct"] == 0
    assert adjudicated["first_critical_step"]["within_three"]["correct"] == 0  # judge named none


@pytest.mark.django_db
def test_an_unknown_judge_is_a_clear_error(project) -> None:
    with pytest.raises(CommandError, match="no judge config or panel 'nope' in project 'demo'"):
        evaluate(project="demo", judge="nope", against="gold")


@pytest.mark.django_db
def test_the_page_shows_the_table_chart_and_confusion_matrix(project) -> None:
    config = JudgeConfig.objects.create(project=project, name="j", backend="openai", model="m")
    trajectory = make_trajectory(project, STEPS)
    judge_says(config, trajectory, "failure", 2)
    Annotation.objects.create(
        trajectory=trajectory,
        source="gold",
        source_name="g",
        verdict="failure",
        first_critical_step=3,
    )
    client = client_for(make_member(project, "ann", Membership.Role.ANNOTATOR))

    page = client.get("/p/demo/judges/evaluate/", {"judge": "j", "against": "gold"})

    assert page.status_code == 200
    html = page.content.decode()
    assert "critical step, within one" in html and "<svg" in html
    assert "Verdicts: gold (rows) against the judge (columns)" in html
    assert page.context["result"].report.step_within_one.correct == 1

    outsider = client_for(make_member(Project.objects.create(slug="other", name="O"), "eve"))
    assert outsider.get("/p/demo/judges/evaluate/").status_code == 404
