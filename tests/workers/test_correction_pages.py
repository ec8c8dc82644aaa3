"""Correction pages and the recovery report: start from the browser, follow the batch, read
original and corrected side by side, overrule the verifier; permissions as elsewhere."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from curation.models import Membership, Project
from tests.annotate.helpers import client_for, label_failure, make_member, make_trajectory
from tests.workers.judge_server import completion, judge_server
from tests.workers.test_corrections import ASK_FIRST, STEPS, Script
from workers.corrections import runner
from workers.models import Correction, CorrectionBatch, JudgeConfig, TeacherConfig


@pytest.fixture
def failed(project: Project):
    trajectory = make_trajectory(project, STEPS, success=False, agent_model="small-7b")
    label_failure(trajectory, 4, error_category="unconfirmed_side_effect")
    return trajectory


def teacher(project: Project, base_url: str) -> TeacherConfig:
    return TeacherConfig.objects.create(
        project=project,
        name="big",
        backend="openai",
        model="big-70b",
        options={"base_url": base_url, "backoff_s": 0.01},
    )


@pytest.mark.django_db
def test_a_researcher_starts_corrections_and_reads_them_side_by_side(project, failed) -> None:
    researcher = client_for(make_member(project, "rita", Membership.Role.RESEARCHER))
    with judge_server(Script([ASK_FIRST])) as server:
        big = teacher(project, server.base_url)
        page = researcher.get(f"/t/{failed.pk}/").content.decode()
        assert f"?trajectory={failed.pk}" in page and "Correct from step 4" in page

        response = researcher.post(
            "/p/demo/corrections/new/",
            {
                "teacher": big.pk,
                "mode": "step",
                "environment": "replay",
                "max_steps": 20,
                "filter": "verdict=failure",
                "verifier": JudgeConfig.objects.get(name="heuristic").pk,
            },
        )
        batch = CorrectionBatch.objects.get()
        assert response.url == f"/correction-batches/{batch.pk}/"
        status = researcher.get(response.url, headers={"HX-Request": "true"}).content.decode()
        assert 'hx-trigger="every 1s"' in status and "1 queued" in status

        runner.correct(batch.corrections.values_list("pk", flat=True))

    correction = Correction.objects.get()
    status = researcher.get(response.url, headers={"HX-Request": "true"}).content.decode()
    assert "hx-trigger" not in status
    detail = researcher.get(f"/corrections/{correction.pk}/").content.decode()
    assert "Original from step 4" in detail and "Corrected from step 4" in detail
    assert "Shall I book it?" in detail and "booked AF1" in detail
    listing = researcher.get("/p/demo/corrections/").content.decode()
    assert "small-7b" in listing and "big" in listing


@pytest.mark.django_db
def test_reviewers_overrule_the_verifier_and_annotators_cannot(project, failed) -> None:
    with judge_server(Script([ASK_FIRST])) as server:
        batch = runner.start_batch(
            teacher(project, server.base_url), project.trajectories.all(), send=False
        )
        runner.correct(batch.corrections.values_list("pk", flat=True))
    correction = Correction.objects.get()
    assert correction.status == "generated"  # no verifier

    annotator = client_for(make_member(project, "ann"))
    assert (
        annotator.post(f"/corrections/{correction.pk}/decide/", {"decision": "accept"}).status_code
        == 403
    )
    assert annotator.get(f"/corrections/{correction.pk}/").status_code == 200
    assert annotator.post("/p/demo/corrections/new/", {}).status_code == 403

    reviewer = client_for(make_member(project, "rev", Membership.Role.REVIEWER))
    reviewer.post(
        f"/corrections/{correction.pk}/decide/", {"decision": "reject", "note": "still books"}
    )
    correction.refresh_from_db()
    assert correction.status == "rejected" and correction.reason == "set by rev: still books"
    assert correction.overridden_by.username == "rev"

    outsider = client_for(make_member(Project.objects.create(slug="o", name="O"), "eve"))
    for url in (
        f"/corrections/{correction.pk}/",
        f"/correction-batches/{batch.pk}/",
        "/p/demo/corrections/",
    ):
        assert outsider.get(url).status_code == 404, url


@pytest.mark.django_db
def test_the_recovery_report_counts_by_teacher_category_and_original_model(project, failed) -> None:
    second = make_trajectory(project, STEPS, success=False, agent_model="small-7b")
    label_failure(second, 2)
    # Both verifications (sent at once, in any order) find an error at step 2: before the
    # first run's branch at step 4 (the copied prefix: accepted), at the second's (rejected).
    verdict, step = "failure", 2

    def answer(body: dict):
        if "Write the next assistant turn" in body["messages"][0]["content"]:
            return completion(json.dumps(ASK_FIRST))
        return completion(
            json.dumps(
                {
                    "verdict": verdict,
                    "first_critical_step": step,
                    "root_cause_step": step,
                    "error_category": "",
                    "responsible_agent": "",
                    "rationale": "r",
                    "confidence": 50,
                }
            )
        )

    with judge_server(answer) as server:
        verifier = JudgeConfig.objects.create(
            project=project,
            name="v",
            backend="openai",
            model="j",
            options={"base_url": server.base_url},
            score_steps=False,
        )
        batch = runner.start_batch(
            teacher(project, server.base_url),
            project.trajectories.all(),
            verifier=verifier,
            send=False,
        )
        runner.correct(batch.corrections.order_by("id").values_list("pk", flat=True))

    out = io.StringIO()
    call_command("correction_report", project="demo", json=True, stdout=out)
    tables = json.loads(out.getvalue())
    assert tables["all"][0] | {} == {
        "value": "all",
        "attempted": 2,
        "accepted": 1,
        "rejected": 1,
        "unverified": 0,
        "failed": 0,
        "recovery_rate": 0.5,
    }
    assert [(r["value"], r["attempted"]) for r in tables["original model"]] == [("small-7b", 2)]
    assert {r["value"] for r in tables["category"]} == {"unconfirmed_side_effect", "(none)"}
    assert tables["teacher"][0]["value"] == "big"


@pytest.mark.django_db
def test_the_correct_command_runs_here_and_says_what_it_skipped(project, failed) -> None:
    make_trajectory(project, STEPS, success=True)
    with judge_server(Script([ASK_FIRST])) as server:
        teacher(project, server.base_url)
        out = io.StringIO()
        call_command("correct", project="demo", teacher="big", here=True, json=True, stdout=out)

    result = json.loads(out.getvalue())
    assert (result["total"], result["skipped"], result["generated"]) == (1, 1, 1)


@pytest.mark.django_db
def test_researchers_make_and_edit_teachers_in_the_browser(project) -> None:
    researcher = client_for(make_member(project, "rita", Membership.Role.RESEARCHER))
    form = {
        "name": "big",
        "backend": "openai",
        "model": "big-70b",
        "temperature": "0",
        "top_p": "1",
        "max_tokens": "1024",
        "max_attempts": "3",
        "options": '{"base_url": "http://127.0.0.1:8001/v1"}',
    }
    assert (
        researcher.post("/p/demo/teachers/new/", {**form, "options": '{"token": "x"}'}).status_code
        == 200
    )
    assert not TeacherConfig.objects.exists()  # a secret in the options is refused

    assert researcher.post("/p/demo/teachers/new/", form).url == "/p/demo/corrections/"
    researcher.post("/p/demo/teachers/big/edit/", {**form, "temperature": "0.5"})
    teacher = TeacherConfig.objects.get(name="big")
    assert teacher.temperature == 0.5 and teacher.options["base_url"].endswith("/v1")
    assert "big-70b" in researcher.get("/p/demo/corrections/").content.decode()

    annotator = client_for(make_member(project, "ann"))
    assert annotator.post("/p/demo/teachers/new/", {**form, "name": "x"}).status_code == 403
