"""The project's trajectory list: filters on the effective label, text search in steps, keyset
pages and a fixed number of queries."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotate import effective
from annotate.models import Adjudication, Annotation
from annotate.paging import PAGE_SIZE
from curation.models import Membership, Project, Trajectory
from tests.annotate.helpers import make_trajectory


def make(
    project: Project, name: str, contents: tuple[str, ...] = ("hello",), **fields
) -> Trajectory:
    steps = [{"role": "user", "content": text} for text in contents]
    return make_trajectory(project, steps, external_id=name, **fields)


def label(trajectory: Trajectory, source: str, name: str = "", author=None, **fields) -> None:
    Annotation.objects.create(
        trajectory=trajectory, source=source, source_name=name, author=author, **fields
    )


@pytest.fixture
def browser(client: Client, project: Project, django_user_model) -> Client:
    user = django_user_model.objects.create_user("alice", password="pw")
    Membership.objects.create(project=project, user=user, role=Membership.Role.ANNOTATOR)
    client.force_login(user)
    return client


@pytest.fixture
def labelled(project: Project, django_user_model) -> Project:
    """Six trajectories, one per kind of effective label."""
    bob, carol = (django_user_model.objects.create_user(n) for n in ("bob", "carol"))
    gold = make(project, "gold", ("Booked flight UA-12",))
    label(gold, "gold", "who-and-when", verdict="failure", error_category="wrong_plan")
    label(gold, "judge", "j1", verdict="success")
    agree = make(project, "agree")
    label(agree, "human", author=bob, verdict="success")
    label(agree, "human", author=carol, verdict="success")
    split = make(project, "split")
    label(split, "human", author=bob, verdict="success")
    label(split, "human", author=carol, verdict="failure", error_category="wrong_tool")
    Adjudication.objects.create(trajectory=split, verdict="partial")
    outcome = make(project, "outcome", ("Nothing to SEE here",), success=False)
    label(outcome, "judge", "j1", verdict="failure", error_category="wrong_tool")
    judged = make(project, "judged")
    label(judged, "judge", "j1", verdict="partial", error_category="wrong_tool")
    make(project, "unlabelled", ("see you",))
    effective.refresh(project.trajectories.values_list("pk", flat=True))
    return project


def shown(browser: Client, query: str = "") -> list[str]:
    response = browser.get(f"/p/demo/?{query}")
    assert response.status_code == 200
    return [t.external_id for t in response.context["trajectories"]]


def test_it_filters_by_effective_verdict(browser, labelled):
    assert shown(browser, "verdict=failure") == ["gold", "outcome"]
    assert shown(browser, "verdict=success") == ["agree"]
    assert shown(browser, "verdict=partial") == ["split", "judged"]


def test_it_filters_by_verdict_source_with_gold_and_agreeing_humans_as_human(browser, labelled):
    assert shown(browser, "source=human") == ["gold", "agree"]
    assert shown(browser, "source=humans_agree") == ["agree"]
    assert shown(browser, "source=adjudicated") == ["split"]
    assert shown(browser, "source=outcome") == ["outcome"]
    assert shown(browser, "source=judge") == ["judged"]
    assert shown(browser, "source=none") == ["unlabelled"]


def test_it_filters_by_error_category_from_the_taxonomy(browser, labelled):
    assert shown(browser, "category=wrong_tool") == ["split", "outcome", "judged"]
    response = browser.get("/p/demo/?category=not_a_category")
    assert "Select a valid choice" in response.content.decode()


def test_it_filters_by_annotated(browser, labelled):
    assert shown(browser, "annotated=yes") == ["gold", "agree", "split"]
    assert shown(browser, "annotated=no") == ["outcome", "judged", "unlabelled"]


def test_it_filters_by_disagreement(browser, labelled):
    assert shown(browser, "judge_disagrees=yes") == ["gold"]
    assert shown(browser, "humans_disagree=yes") == ["split"]
    assert "split" not in shown(browser, "humans_disagree=no")


def test_it_combines_filters(browser, labelled):
    assert shown(browser, "verdict=failure&annotated=no") == ["outcome"]
    assert shown(browser, "category=wrong_tool&source=judge&outcome=unknown") == ["judged"]
    assert shown(browser, "verdict=failure&q=flight") == ["gold"]
    assert shown(browser, "verdict=success&q=flight") == []


def test_it_searches_step_content_case_insensitively(browser, labelled):
    assert shown(browser, "q=FLIGHT") == ["gold"]
    assert shown(browser, "q=see") == ["outcome", "unlabelled"]
    assert shown(browser, "q=%25") == []  # LIKE wildcards are matched literally
    assert shown(browser, "q=_") == []


def test_it_shows_effective_verdict_source_and_category_columns(browser, labelled):
    html = browser.get("/p/demo/").content.decode()
    assert '<span class="badge verdict-partial">partial</span>' in html
    assert '<span class="muted source">adjudicated</span>' in html
    assert '<span class="muted source">verified outcome</span>' in html
    assert 'wrong_plan <span class="muted source">human</span>' in html
    assert "humans ≠" in html and "judge ≠" in html


def test_it_pages_filtered_results_by_id(browser, project):
    for n in range(130):
        make(project, f"r{n}", ("a needle",) if n % 2 else ("hay",))
    needles = [f"r{n}" for n in range(130) if n % 2]
    first = browser.get("/p/demo/?q=needle")
    assert [t.external_id for t in first.context["trajectories"]] == needles[:PAGE_SIZE]
    cursor = first.context["next_after"]
    assert f'href="?q=needle&amp;after={cursor}"' in first.content.decode()
    second = browser.get(f"/p/demo/?q=needle&after={cursor}")
    assert [t.external_id for t in second.context["trajectories"]] == needles[PAGE_SIZE:]
    assert second.context["next_after"] is None


def count_queries(browser: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert browser.get(url).status_code == 200
    return len(queries)


def test_list_queries_stay_fixed_with_every_filter_set(browser, project):
    for n in range(PAGE_SIZE + 5):
        trajectory = make(project, f"r{n}", ("match me",))
        label(trajectory, "judge", "j1", verdict="failure", error_category="wrong_tool")
    effective.refresh(project.trajectories.values_list("pk", flat=True))
    query = "q=match&verdict=failure&source=judge&category=wrong_tool&annotated=no"
    first = count_queries(browser, f"/p/demo/?{query}")
    cursor = browser.get(f"/p/demo/?{query}").context["next_after"]
    assert cursor is not None
    assert first == count_queries(browser, f"/p/demo/?{query}&after={cursor}")
    assert first == count_queries(browser, "/p/demo/")
    assert first <= 6
