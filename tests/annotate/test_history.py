"""Every save of a label by a person is kept in its history: who, when, what changed; draft
autosaves fold together; the review page shows it, escaped, to whom it may."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.models import F
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotate.history import COALESCE, merge
from annotate.models import AnnotationChange
from curation.models import Membership, Trajectory
from tests.annotate.helpers import client_for, make_member
from tests.annotate.test_adjudication import disagreement, final_label
from tests.annotate.test_annotation_concurrency import race
from tests.annotate.test_annotation_form import FAILURE, make_trajectory, post, stored, submit


@pytest.fixture
def trajectory(project) -> Trajectory:
    return make_trajectory(project)


@pytest.fixture
def alice(project) -> User:
    return make_member(project, "alice")


@pytest.fixture
def browser(alice) -> Client:
    return client_for(alice)


def rows() -> list[AnnotationChange]:
    return list(AnnotationChange.objects.order_by("id"))


def age_history(by: timedelta = COALESCE + timedelta(seconds=1)) -> None:
    """Make the recorded saves older, as if the person had paused."""
    AnnotationChange.objects.update(at=F("at") - by)


def test_a_first_draft_is_recorded_as_created_with_the_values_given(browser, alice, trajectory):
    post(browser, trajectory, verdict="failure", rationale="looks off")
    [row] = rows()
    assert (row.action, row.user, row.trajectory, row.annotation) == (
        "created",
        alice,
        trajectory,
        stored(alice),
    )
    assert row.changes == {
        "verdict": [None, "failure"],
        "rationale": [None, "looks off"],
        "status": [None, "draft"],
    }
    assert row.at == stored(alice).updated_at


def test_autosaves_within_the_window_fold_into_one_row(browser, alice, trajectory):
    post(browser, trajectory, verdict="failure", rationale="a")
    post(browser, trajectory, version=1, verdict="failure", rationale="ab")
    post(browser, trajectory, version=2, verdict="success", rationale="abc")
    [row] = rows()
    assert row.action == "created"
    assert row.changes == {
        "verdict": [None, "success"],
        "rationale": [None, "abc"],
        "status": [None, "draft"],
    }
    assert row.at == stored(alice).updated_at
    assert stored(alice).version == 3


def test_an_autosave_after_a_pause_starts_a_row_with_only_what_changed(browser, trajectory):
    post(browser, trajectory, verdict="failure", rationale="a")
    age_history()
    post(browser, trajectory, version=1, verdict="failure", rationale="ab", confidence="0.5")
    post(browser, trajectory, version=2, verdict="failure", rationale="a", confidence="0.5")
    created, updated = rows()
    assert created.changes["rationale"] == [None, "a"]
    assert updated.action == "updated"
    assert updated.changes == {"confidence": [None, 0.5]}  # the rationale came back: dropped


def test_a_submit_is_its_own_row_and_is_never_folded_into(browser, alice, trajectory):
    post(browser, trajectory, rationale="draft")
    submit(browser, trajectory, version=1, **FAILURE, rationale="final")
    submit(browser, trajectory, version=2, **FAILURE, rationale="final, edited")
    created, first, second = rows()
    assert created.action == "created"
    assert first.action == second.action == "submitted"
    assert first.changes == {
        "verdict": ["", "failure"],
        "first_critical_step": [None, 3],
        "root_cause_step": [None, 3],
        "error_category": ["", "wrong_tool"],
        "rationale": ["draft", "final"],
        "status": ["draft", "submitted"],
    }
    assert second.changes == {"rationale": ["final", "final, edited"]}
    assert {r.user for r in rows()} == {alice}


def test_a_draft_save_after_a_submit_is_not_folded_into_the_submit(browser, trajectory):
    submit(browser, trajectory, **FAILURE)
    post(browser, trajectory, version=1, rationale="draft over it")  # refused: submitted
    assert [r.action for r in rows()] == ["created"]


def test_refused_saves_record_nothing(browser, alice, trajectory):
    post(browser, trajectory, rationale="mine")
    stale = post(browser, trajectory, version=5, rationale="from an old tab")
    invalid = submit(browser, trajectory, version=1, verdict="failure")  # no critical step
    assert stale.status_code == invalid.status_code == 200
    assert stored(alice).rationale == "mine"
    assert len(rows()) == 1


def test_each_annotator_has_their_own_rows(project, trajectory, browser):
    bob = make_member(project, "bob")
    post(browser, trajectory, rationale="alice's")
    post(client_for(bob), trajectory, rationale="bob's")
    assert [(r.user.username, r.changes["rationale"]) for r in rows()] == [
        ("alice", [None, "alice's"]),
        ("bob", [None, "bob's"]),
    ]


def test_adjudications_are_recorded_on_every_save(project):
    trajectory = disagreement(project)
    reviewer = make_member(project, "rev", Membership.Role.REVIEWER)
    url = f"/p/{project.slug}/review/{trajectory.pk}/"
    client = client_for(reviewer)
    assert client.post(url, final_label()).status_code == 302
    stamp = trajectory.adjudication.updated_at.isoformat()
    client.post(url, final_label(rationale="Clearer.", based_on=stamp))
    client.post(url, final_label(rationale="Too late.", based_on=stamp))  # stale: refused
    created, updated = rows()
    assert (created.action, created.user, created.adjudication) == (
        "created",
        reviewer,
        trajectory.adjudication,
    )
    assert created.changes == {
        "verdict": [None, "failure"],
        "first_critical_step": [None, 3],
        "root_cause_step": [None, 1],
        "error_category": [None, "wrong_plan"],
        "rationale": [None, "Step 3 books the wrong flight."],
    }
    assert (updated.action, updated.changes) == (
        "updated",
        {"rationale": ["Step 3 books the wrong flight.", "Clearer."]},
    )


def test_history_outlives_the_label_it_describes(browser, alice, trajectory):
    post(browser, trajectory, rationale="x")
    stored(alice).delete()
    [row] = rows()
    assert row.annotation is None and row.changes["rationale"] == [None, "x"]


def test_merge_keeps_the_first_old_and_the_last_new_value():
    earlier = {"verdict": [None, "failure"], "rationale": ["", "a"]}
    later = {"rationale": ["a", ""], "confidence": [0.2, 0.4]}
    assert merge(earlier, later) == {"verdict": [None, "failure"], "confidence": [0.2, 0.4]}


# --- the review page -------------------------------------------------------------------------


def history_html(client: Client, trajectory: Trajectory) -> str:
    html = client.get(f"/t/{trajectory.pk}/").content.decode()
    start = html.find('<details class="card history"')
    return html[start : html.index("</details>", start)] if start >= 0 else ""


def test_the_review_page_shows_the_history_collapsed_and_escaped(browser, trajectory):
    post(browser, trajectory, rationale="<script>alert(1)</script>")
    html = history_html(browser, trajectory)
    assert html.startswith('<details class="card history" id="label-history">')  # not open
    assert "<strong>alice</strong> created the annotation of alice" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>" not in html


def test_annotators_see_their_own_changes_and_the_adjudications_only(project, trajectory):
    alice, bob = make_member(project, "alice"), make_member(project, "bob")
    post(client_for(alice), trajectory, rationale="alice draft")
    post(client_for(bob), trajectory, rationale="bob draft")
    AnnotationChange.objects.create(
        trajectory=trajectory, user=bob, at=stored(bob).updated_at, action="updated"
    )  # a row whose label was deleted: reviewers only
    reviewer = make_member(project, "rev", Membership.Role.REVIEWER)
    seen_by_alice = history_html(client_for(alice), trajectory)
    assert "alice draft" in seen_by_alice and "bob draft" not in seen_by_alice
    seen_by_reviewer = history_html(client_for(reviewer), trajectory)
    assert "alice draft" in seen_by_reviewer and "bob draft" in seen_by_reviewer
    assert "a label since deleted" in seen_by_reviewer
    assert history_html(client_for(make_member(project, "carol")), trajectory) == ""


def test_the_review_page_runs_one_query_for_the_history_however_long(project, trajectory):
    reviewer = make_member(project, "rev", Membership.Role.REVIEWER)
    client = client_for(reviewer)

    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(f"/t/{trajectory.pk}/").status_code == 200
        return len(queries)

    post(client_for(make_member(project, "ann0")), trajectory, rationale="first")
    few = count()
    for n in range(1, 6):
        annotator = client_for(make_member(project, f"ann{n}"))
        post(annotator, trajectory, rationale="draft")
        age_history()
        post(annotator, trajectory, version=1, rationale="more")
    assert AnnotationChange.objects.count() == 11
    assert count() == few


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("version", [0, 1])
def test_of_two_racing_saves_only_the_winner_is_recorded(project, version):
    trajectory = make_trajectory(project)
    alice = make_member(project, "alice")
    if version:
        post(client_for(alice), trajectory, rationale="start")
        age_history()
    forms = [
        {"version": version, "intent": "submit", **FAILURE, "rationale": f"s{n}"} for n in (0, 1)
    ]
    race(trajectory, alice, forms)
    latest = AnnotationChange.objects.order_by("id").last()
    assert AnnotationChange.objects.count() == 1 + version
    assert latest.changes["rationale"][1] == stored(alice).rationale
