"""Judge pages: a researcher makes, edits and runs a judge and follows the batch; annotators
only look; outsiders see nothing; secrets and bad settings are refused with the reason."""

from __future__ import annotations

import pytest

from annotate.models import Annotation
from curation.models import Membership, Project
from tests.annotate.helpers import client_for, make_member, make_trajectory
from workers.judging import runs
from workers.models import JudgeBatch, JudgeConfig

STEPS = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "<b>bye</b>"}]
FORM = {
    "name": "gpt",
    "backend": "openai",
    "model": "gpt-4o-mini",
    "options": '{"base_url": "http://127.0.0.1:8001/v1", "api_key_env": "OPENAI_API_KEY"}',
    "strategy": "binary_search",
    "score_steps": "on",
    "prompt_template": "Judge it.",
    "temperature": "0",
    "top_p": "1",
    "max_tokens": "512",
    "token_budget": "8000",
    "max_attempts": "2",
    "filter": "outcome=failure",
    "is_active": "on",
}


@pytest.fixture
def researcher(project: Project):
    return client_for(make_member(project, "rita", Membership.Role.RESEARCHER))


@pytest.mark.django_db
def test_a_researcher_makes_a_judge_and_editing_it_makes_a_new_version(project, researcher) -> None:
    response = researcher.post("/p/demo/judges/new/", FORM)
    assert response.status_code == 302, response.content.decode()[:2000]
    config = JudgeConfig.objects.get(project=project, name="gpt")
    assert config.options["api_key_env"] == "OPENAI_API_KEY"
    assert config.filter == {"outcome": "failure"}
    assert config.current_version.number == 1

    researcher.post("/p/demo/judges/gpt/edit/", {**FORM, "prompt_template": "Stricter."})
    config.refresh_from_db()
    assert config.current_version.number == 2
    assert config.current_version.settings["prompt_template"] == "Stricter."

    researcher.post(
        "/p/demo/judges/gpt/edit/", {**FORM, "prompt_template": "Stricter.", "filter": ""}
    )
    config.refresh_from_db()
    assert config.current_version.number == 2  # the filter is not part of what a judge says

    page = researcher.get("/p/demo/judges/gpt/")
    assert "gpt v2" in page.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"options": '{"api_key": "sk-123"}'}, "looks like a secret"),
        ({"options": "{not json"}, "Not valid JSON"),
        ({"filter": "outcome=sideways"}, "Bad filter"),
        ({"filter": "colour=red"}, "Unknown filter: colour"),
        ({"backend": "heuristic"}, "whole trajectories: all at once"),
        ({"model": ""}, "Name the model"),
        ({"name": "new"}, "taken by a page"),
        ({"top_p": "0"}, "top_p is in"),
    ],
)
def test_bad_settings_are_refused_with_the_reason(project, researcher, change, message) -> None:
    response = researcher.post("/p/demo/judges/new/", {**FORM, **change})
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not JudgeConfig.objects.filter(name=FORM["name"]).exists()


@pytest.mark.django_db
def test_running_a_judge_queues_a_batch_whose_page_shows_progress(project, researcher) -> None:
    for _ in range(3):
        make_trajectory(project, STEPS, success=False)
    page = researcher.get("/p/demo/judges/heuristic/")
    assert "Judge 3 trajectories" in page.content.decode()

    response = researcher.post("/p/demo/judges/heuristic/run/")
    batch = JudgeBatch.objects.get()
    assert response.url == f"/judge-batches/{batch.pk}/"
    status = researcher.get(response.url, headers={"HX-Request": "true"}).content.decode()
    assert 'hx-trigger="every 1s"' in status and "0 / 3" in status

    runs.judge(batch.version_id, list(project.trajectories.values_list("pk", flat=True)), batch.pk)
    status = researcher.get(response.url, headers={"HX-Request": "true"}).content.decode()
    assert "hx-trigger" not in status and "3 judged" in status
    full = researcher.get(response.url).content.decode()
    assert "failure" in full
    assert Annotation.objects.filter(source="heuristic").count() == 3


@pytest.mark.django_db
def test_judge_labels_sit_next_to_the_humans_on_the_review_page(project, researcher) -> None:
    trajectory = make_trajectory(project, STEPS, success=False)
    batch = runs.start_batch(
        JudgeConfig.objects.get(name="heuristic"), project.trajectories.all(), send=False
    )
    runs.judge(batch.version_id, [trajectory.pk], batch.pk)
    page = researcher.get(f"/t/{trajectory.pk}/").content.decode()
    assert "heuristic v1" in page
    assert "<b>bye</b>" not in page  # trajectory text stays escaped


@pytest.mark.django_db
def test_annotators_look_but_do_not_change_or_run_judges(project) -> None:
    annotator = client_for(make_member(project, "ann", Membership.Role.ANNOTATOR))
    assert annotator.get("/p/demo/judges/").status_code == 200
    assert annotator.get("/p/demo/judges/heuristic/").status_code == 200
    assert annotator.get("/p/demo/judges/new/").status_code == 403
    assert annotator.post("/p/demo/judges/new/", FORM).status_code == 403
    assert annotator.post("/p/demo/judges/heuristic/run/").status_code == 403
    assert not JudgeBatch.objects.exists()


@pytest.mark.django_db
def test_outsiders_see_no_judge_page(project) -> None:
    batch = runs.start_batch(
        JudgeConfig.objects.get(name="heuristic"), project.trajectories.all(), send=False
    )
    outsider = client_for(make_member(Project.objects.create(slug="other", name="O"), "eve"))
    for url in ("/p/demo/judges/", "/p/demo/judges/heuristic/", f"/judge-batches/{batch.pk}/"):
        assert outsider.get(url).status_code == 404, url
    assert outsider.post("/p/demo/judges/heuristic/run/").status_code == 404
