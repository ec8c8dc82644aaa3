"""The annotation form: drafts, submit rules, typed extra fields, versions and permissions."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.http import HttpResponse
from django.test import Client

from annotate.models import Annotation, Assignment, EffectiveLabel, Queue, QueueItem
from annotate.views.annotation import STALE
from curation.models import Membership, Project, Step, Task, Trajectory
from tests.annotate.helpers import client_for, make_member

STEPS = 5
SCHEMA = [
    {"name": "difficulty", "type": "numeric", "min": 1, "max": 5},
    {"name": "domain", "type": "categorical", "choices": ["airline", "retail"]},
    {"name": "needs_review", "type": "boolean"},
]


def make_trajectory(project: Project, number: int = 1) -> Trajectory:
    task = Task.objects.create(project=project, external_id=f"task-{number}")
    trajectory = Trajectory.objects.create(
        project=project,
        task=task,
        source_format="canonical",
        step_count=STEPS,
        content_hash=f"hash-{number}",
    )
    Step.objects.bulk_create(
        Step(trajectory=trajectory, index=i, role="assistant", content=f"step {i}")
        for i in range(STEPS)
    )
    return trajectory


def post(client: Client, trajectory: Trajectory, query: str = "", **data: Any) -> HttpResponse:
    fields = {"version": 0, **data}
    return client.post(f"/t/{trajectory.pk}/annotation/{query}", fields, HTTP_HX_REQUEST="true")


def submit(client: Client, trajectory: Trajectory, **data: Any) -> HttpResponse:
    return post(client, trajectory, intent="submit", **data)


FAILURE = {"verdict": "failure", "first_critical_step": 3, "error_category": "wrong_tool"}


@pytest.fixture
def trajectory(project) -> Trajectory:
    project.label_schema = SCHEMA
    project.save()
    return make_trajectory(project)


@pytest.fixture
def alice(project) -> User:
    return make_member(project, "alice")


@pytest.fixture
def browser(alice) -> Client:
    return client_for(alice)


def stored(user: User) -> Annotation:
    return Annotation.objects.get(author=user)


# --- drafts and submit -----------------------------------------------------------------------


def test_it_saves_a_draft_and_answers_with_the_save_state(browser, alice, trajectory):
    response = post(browser, trajectory, verdict="failure", rationale="looks off")
    assert response.status_code == 200
    assert response["HX-Retarget"] == "#annotation-state"
    assert re.search(r"Draft saved \d\d:\d\d:\d\d", response.content.decode())
    assert 'name="version" value="1"' in response.content.decode()
    annotation = stored(alice)
    assert (annotation.status, annotation.version, annotation.source) == ("draft", 1, "human")
    assert annotation.rationale == "looks off"


def test_drafts_may_be_incomplete(browser, alice, trajectory):
    post(browser, trajectory, verdict="failure", root_cause_step=4)
    assert stored(alice).first_critical_step is None


def test_it_submits_a_draft(browser, alice, trajectory):
    post(browser, trajectory, verdict="failure")
    response = submit(browser, trajectory, version=1, **FAILURE, confidence="0.8")
    assert "Submitted" in response.content.decode()
    annotation = stored(alice)
    assert (annotation.status, annotation.version) == ("submitted", 2)
    assert (annotation.first_critical_step, annotation.error_category) == (3, "wrong_tool")
    assert annotation.confidence == 0.8


def test_the_root_cause_defaults_to_the_critical_step(browser, alice, trajectory):
    submit(browser, trajectory, **FAILURE)
    assert stored(alice).root_cause_step == 3


def test_the_root_cause_may_come_earlier(browser, alice, trajectory):
    submit(browser, trajectory, **FAILURE, root_cause_step=1)
    assert stored(alice).root_cause_step == 1


def test_a_submitted_annotation_is_not_turned_back_into_a_draft(browser, alice, trajectory):
    submit(browser, trajectory, **FAILURE)
    response = post(browser, trajectory, version=1, verdict="success")
    assert "Already submitted" in response.content.decode()
    assert (stored(alice).status, stored(alice).verdict) == ("submitted", "failure")


def test_a_second_user_gets_a_separate_annotation(browser, alice, project, trajectory):
    bob = make_member(project, "bob")
    submit(browser, trajectory, **FAILURE)
    submit(client_for(bob), trajectory, verdict="success")
    assert Annotation.objects.count() == 2
    assert (stored(alice).verdict, stored(bob).verdict) == ("failure", "success")


# --- submit rules ----------------------------------------------------------------------------


def refused(response: HttpResponse, field_error: str) -> None:
    html = response.content.decode()
    assert "Not saved: fix the marked fields." in html
    assert field_error in html


def test_a_verdict_is_needed(browser, trajectory):
    refused(submit(browser, trajectory), "Choose a verdict.")
    assert not Annotation.objects.exists()


def test_a_failure_needs_a_critical_step(browser, trajectory):
    response = submit(browser, trajectory, verdict="failure")
    refused(response, "A failure needs a first critical step.")
    assert not Annotation.objects.exists()


def test_the_root_cause_cannot_come_after_the_critical_step(browser, trajectory):
    response = submit(browser, trajectory, **{**FAILURE, "root_cause_step": 4})
    refused(response, "The root cause cannot come after the critical step.")
    assert not Annotation.objects.exists()


def test_steps_must_lie_within_the_trajectory(browser, trajectory):
    response = submit(browser, trajectory, **{**FAILURE, "first_critical_step": STEPS})
    refused(response, f"This trajectory has steps 0 to {STEPS - 1}.")
    response = post(browser, trajectory, first_critical_step=-1)
    assert "Not saved" in response.content.decode()
    assert not Annotation.objects.exists()


def test_the_category_must_be_in_the_taxonomy(browser, trajectory):
    refused(
        submit(browser, trajectory, **{**FAILURE, "error_category": "bad_vibes"}),
        "Select a valid choice.",
    )


def test_a_draft_with_a_bad_value_is_not_saved(browser, trajectory):
    response = post(browser, trajectory, confidence="2")
    assert "Not saved" in response.content.decode()
    assert not Annotation.objects.exists()


def test_the_form_shows_each_category_with_its_description(browser, trajectory):
    html = browser.get(f"/t/{trajectory.pk}/annotation/").content.decode()
    assert "<kbd>1</kbd> <strong>misunderstood_task</strong>" in html
    assert "Called a tool that does not fit the step." in html


# --- extra fields and step labels ------------------------------------------------------------


def test_extra_fields_are_stored_typed(browser, alice, trajectory):
    extra = {"extra_difficulty": "4", "extra_domain": "retail", "extra_needs_review": "false"}
    submit(browser, trajectory, **FAILURE, **extra)
    assert stored(alice).extra == {"difficulty": 4.0, "domain": "retail", "needs_review": False}


@pytest.mark.parametrize(
    "field, value",
    [("extra_difficulty", "9"), ("extra_difficulty", "hard"), ("extra_domain", "space")],
)
def test_extra_fields_are_validated(browser, trajectory, field, value):
    response = submit(browser, trajectory, **FAILURE, **{field: value})
    assert "Not saved" in response.content.decode()
    assert not Annotation.objects.exists()


def test_step_labels_are_stored(browser, alice, trajectory):
    labels = {"step_label_0": "exploration", "step_label_2": "regression", "step_label_3": ""}
    post(browser, trajectory, **labels)
    assert stored(alice).step_labels == {"0": "exploration", "2": "regression"}
    html = browser.get(f"/t/{trajectory.pk}/").content.decode()
    assert '<option value="regression" selected>' in html


@pytest.mark.parametrize("key, value", [("step_label_0", "genius"), ("step_label_9", "progress")])
def test_bad_step_labels_are_refused(browser, trajectory, key, value):
    assert "Not saved" in post(browser, trajectory, **{key: value}).content.decode()
    assert not Annotation.objects.exists()


# --- versions --------------------------------------------------------------------------------


def test_a_stale_save_is_refused_and_overwrites_nothing(browser, alice, trajectory):
    post(browser, trajectory, rationale="first tab")
    post(browser, trajectory, version=1, rationale="second tab")
    for response in (
        post(browser, trajectory, version=1, rationale="stale draft"),
        submit(browser, trajectory, version=1, **FAILURE, rationale="stale submit"),
    ):
        html = response.content.decode()
        assert STALE in html
        assert 'name="version" value="1"' in html  # the form stays stale until reloaded
    annotation = stored(alice)
    assert (annotation.rationale, annotation.version, annotation.status) == (
        "second tab",
        2,
        "draft",
    )


def test_a_second_first_save_is_refused(browser, alice, trajectory):
    post(browser, trajectory, rationale="one tab")
    assert STALE in post(browser, trajectory, version=0, rationale="other").content.decode()
    assert stored(alice).rationale == "one tab"


def test_reloading_shows_the_stored_version(browser, trajectory):
    post(browser, trajectory, rationale="stored text")
    html = browser.get(f"/t/{trajectory.pk}/annotation/").content.decode()
    assert 'name="version" value="1"' in html
    assert "stored text" in html


# --- effective label and queues --------------------------------------------------------------


def test_submit_refreshes_the_effective_label(browser, trajectory):
    post(browser, trajectory, **FAILURE)
    assert not EffectiveLabel.objects.filter(trajectory=trajectory, verdict="failure").exists()
    submit(browser, trajectory, version=1, **FAILURE)
    label = EffectiveLabel.objects.get(trajectory=trajectory)
    assert (label.verdict, label.verdict_source) == ("failure", "human")
    assert label.first_critical_step == 3


def test_submit_from_a_queue_completes_the_assignment(browser, alice, project, trajectory):
    queue = Queue.objects.create(project=project, name="q")
    item = QueueItem.objects.create(queue=queue, trajectory=trajectory, position=0, claims=1)
    Assignment.objects.create(item=item, annotator=alice)
    page = browser.get(f"/t/{trajectory.pk}/?queue={queue.pk}").content.decode()
    assert f'href="/q/{queue.pk}/next/"' in page
    assert f'hx-post="/t/{trajectory.pk}/annotation/?queue={queue.pk}"' in page
    response = post(browser, trajectory, f"?queue={queue.pk}", intent="submit", **FAILURE)
    assert f'href="/q/{queue.pk}/next/"' in response.content.decode()
    assert Assignment.objects.get().status == Assignment.Status.DONE


def test_a_queue_of_another_project_is_ignored(browser, trajectory):
    other = Project.objects.create(slug="other", name="Other")
    queue = Queue.objects.create(project=other, name="q")
    page = browser.get(f"/t/{trajectory.pk}/?queue={queue.pk}").content.decode()
    assert f"/q/{queue.pk}/next/" not in page


# --- the page --------------------------------------------------------------------------------


def test_the_review_page_shows_the_form_with_the_saved_draft(browser, trajectory):
    post(browser, trajectory, **FAILURE)
    html = browser.get(f"/t/{trajectory.pk}/").content.decode()
    assert 'id="annotation-form"' in html
    assert "Draft saved" in html
    assert 'value="failure" checked' in html
    assert 'hx-trigger="input delay:1s"' in html
    assert 'id="keys-help"' in html


def test_the_page_has_no_inline_scripts_or_handlers(browser, trajectory):
    html = browser.get(f"/t/{trajectory.pk}/").content.decode()
    assert re.findall(r"<script\b[^>]*>", html) and all(
        " src=" in tag for tag in re.findall(r"<script\b[^>]*>", html)
    )
    assert not re.search(r"<[^>]*\son[a-z]+\s*=", html)
    assert "js/review.js" in html


# --- permissions -----------------------------------------------------------------------------


@pytest.mark.parametrize("role", Membership.Role.values)
def test_members_of_every_role_may_annotate(project, trajectory, role):
    user = make_member(project, f"user-{role}", role)
    response = submit(client_for(user), trajectory, **FAILURE)
    assert "Submitted" in response.content.decode()
    assert stored(user).status == "submitted"


def test_another_projects_annotator_gets_404(trajectory):
    other = Project.objects.create(slug="other", name="Other")
    client = client_for(make_member(other, "mallory"))
    assert client.get(f"/t/{trajectory.pk}/annotation/").status_code == 404
    assert submit(client, trajectory, **FAILURE).status_code == 404
    assert post(client, trajectory, verdict="failure").status_code == 404
    assert not Annotation.objects.exists()


def test_anonymous_users_are_redirected_to_login(client, trajectory):
    url = f"/t/{trajectory.pk}/annotation/"
    for response in (client.get(url), client.post(url, {"version": 0})):
        assert response.status_code == 302
        assert response["Location"] == f"/accounts/login/?next={url}"
