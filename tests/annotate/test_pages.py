"""The server-rendered pages: project list, project page, trajectory page."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from annotate.paging import PAGE_SIZE
from annotate.views.review import LONG_CONTENT
from curation.formats.reading import RawItem
from curation.ingest import import_items
from curation.models import Membership, Project, Trajectory

SCRIPT = "<script>alert(1)</script>"
SCRIPT_ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"
IMG = "<img src=x onerror=alert(1)>"
IMG_ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"


def run(number: int, *, steps: list[dict] | None = None, **fields: Any) -> dict:
    """A canonical record; `fields` override its top-level keys."""
    record = {
        "id": f"run-{number}",
        "task": {"id": f"task-{number % 3}", "instruction": "Book a flight."},
        "agent": {"model": "gpt-4o", "role": "student"},
        "steps": steps
        or [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": f"Hi, this is run {number}."},
        ],
        "outcome": {"success": False, "reward": 0.0},
    }
    record.update(fields)
    return record


def load(project: Project, records: list[dict]) -> list[Trajectory]:
    items = [RawItem(source="test", location=f"item {i}", obj=r) for i, r in enumerate(records)]
    summary = import_items(project, items)
    assert summary.failed == 0, summary.errors
    return list(project.trajectories.order_by("id"))


@pytest.fixture
def member(db, project, django_user_model):
    user = django_user_model.objects.create_user("alice", password="pw")
    Membership.objects.create(project=project, user=user, role=Membership.Role.ANNOTATOR)
    return user


@pytest.fixture
def browser(client: Client, member) -> Client:
    client.force_login(member)
    return client


def page(browser: Client, url: str) -> str:
    response = browser.get(url)
    assert response.status_code == 200
    return response.content.decode()


# --- permissions ----------------------------------------------------------------------------


def test_it_redirects_anonymous_users_to_login(client, project):
    (trajectory,) = load(project, [run(1)])
    for url in ("/", "/p/demo/", f"/t/{trajectory.pk}/"):
        response = client.get(url)
        assert response.status_code == 302
        assert response["Location"] == f"/accounts/login/?next={url}"


def test_it_gives_404_to_users_without_membership(client, project, django_user_model):
    (trajectory,) = load(project, [run(1)])
    client.force_login(django_user_model.objects.create_user("mallory"))
    assert client.get("/p/demo/").status_code == 404
    assert client.get(f"/t/{trajectory.pk}/").status_code == 404
    assert "/p/demo/" not in page(client, "/")


def test_it_gives_404_for_a_missing_trajectory(browser, project):
    assert browser.get("/t/999999/").status_code == 404


def test_superusers_see_every_project(client, project, django_user_model):
    (trajectory,) = load(project, [run(1)])
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    assert page(client, "/p/demo/")
    assert page(client, f"/t/{trajectory.pk}/")


# --- project list ---------------------------------------------------------------------------


def test_it_lists_projects_with_links_and_counts(browser, project):
    load(project, [run(n) for n in range(4)])
    html = page(browser, "/")
    assert 'href="/p/demo/"' in html
    projects = browser.get("/").context["projects"]
    assert [(p.task_count, p.trajectory_count) for p in projects] == [(3, 4)]


# --- project page ---------------------------------------------------------------------------


def shown_ids(browser: Client, url: str) -> list[str]:
    response = browser.get(url)
    assert response.status_code == 200
    return [t.external_id for t in response.context["trajectories"]]


def test_it_shows_the_projects_trajectories(browser, project):
    gold = {"verdict": "failure", "first_critical_step": 1}
    load(project, [run(1, labels=gold), run(2, outcome={"success": True, "reward": 1.0})])
    html = page(browser, "/p/demo/")
    assert "run-1" in html and "run-2" in html
    assert "gpt-4o" in html and "student" in html
    assert ">success<" in html and ">failure<" in html and "reward 1" in html
    rows = browser.get("/p/demo/").context["trajectories"]
    assert [(t.external_id, t.has_gold) for t in rows] == [("run-1", True), ("run-2", False)]


def test_it_filters_by_outcome(browser, project):
    load(
        project,
        [
            run(1, outcome={"success": True, "reward": 1.0}),
            run(2, outcome={"success": False, "reward": 0.0}),
            run(3, outcome={}),
        ],
    )
    assert shown_ids(browser, "/p/demo/?outcome=success") == ["run-1"]
    assert shown_ids(browser, "/p/demo/?outcome=failure") == ["run-2"]
    assert shown_ids(browser, "/p/demo/?outcome=unknown") == ["run-3"]


def test_it_filters_by_task_model_and_role(browser, project):
    load(
        project,
        [
            run(1, task={"id": "t-a"}),
            run(2, task={"id": "t-b"}, agent={"model": "qwen-7b", "role": "student"}),
            run(3, task={"id": "t-b"}, agent={"model": "gpt-4o", "role": "teacher"}),
        ],
    )
    assert shown_ids(browser, "/p/demo/?task=t-b") == ["run-2", "run-3"]
    assert shown_ids(browser, "/p/demo/?model=qwen-7b") == ["run-2"]
    assert shown_ids(browser, "/p/demo/?role=teacher") == ["run-3"]
    assert shown_ids(browser, "/p/demo/?task=t-b&model=gpt-4o&role=teacher") == ["run-3"]


def test_it_ignores_invalid_filter_values_and_says_so(browser, project):
    load(project, [run(1)])
    response = browser.get("/p/demo/?outcome=bogus&after=x")
    assert response.status_code == 200
    assert [t.external_id for t in response.context["trajectories"]] == ["run-1"]
    assert "Select a valid choice" in response.content.decode()


def test_it_pages_by_id_with_after(browser, project):
    trajectories = load(project, [run(n) for n in range(PAGE_SIZE + 10)])
    first = browser.get("/p/demo/?outcome=failure")
    assert [t.pk for t in first.context["trajectories"]] == [t.pk for t in trajectories[:50]]
    cursor = trajectories[PAGE_SIZE - 1].pk
    assert f'href="?outcome=failure&amp;after={cursor}"' in first.content.decode()

    second = browser.get(f"/p/demo/?outcome=failure&after={cursor}")
    assert [t.pk for t in second.context["trajectories"]] == [t.pk for t in trajectories[50:]]
    assert second.context["next_after"] is None
    assert 'rel="next"' not in second.content.decode()


def count_queries(browser: Client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        assert browser.get(url).status_code == 200
    return len(queries)


def test_project_page_queries_do_not_grow_with_trajectories(browser, member):
    gold = {"verdict": "failure", "first_critical_step": 0}
    for slug, count in (("small", 5), ("large", 50)):
        project = Project.objects.create(slug=slug, name=slug)
        Membership.objects.create(project=project, user=member)
        load(project, [run(n, labels=gold) for n in range(count)])
    small = count_queries(browser, "/p/small/")
    assert small == count_queries(browser, "/p/large/")
    assert small <= 6


# --- trajectory page ------------------------------------------------------------------------


def test_it_shows_task_outcome_metadata_and_steps(browser, project):
    (trajectory,) = load(
        project,
        [
            run(
                1,
                task={"id": "airline-3", "instruction": "Change my reservation."},
                outcome={"success": False, "reward": 0.0, "info": {"r_actions": 0}},
                metadata={"trial": 2},
                steps=[
                    {"role": "user", "content": "Change it."},
                    {
                        "role": "assistant",
                        "content": "",
                        "reasoning": "I should look the user up.",
                        "tool_calls": [{"id": "c1", "name": "get_user", "arguments": {"id": 7}}],
                    },
                    {"role": "tool", "name": "get_user", "tool_call_id": "c1", "content": "{}"},
                ],
            )
        ],
    )
    html = page(browser, f"/t/{trajectory.pk}/")
    assert "Change my reservation." in html and "airline-3" in html
    assert ">failure<" in html and "reward 0" in html
    assert "gpt-4o" in html and "&quot;trial&quot;: 2" in html
    assert 'id="step-0"' in html and 'id="step-2"' in html
    assert "I should look the user up." in html
    assert "get_user" in html and "&quot;id&quot;: 7" in html and "<code>c1</code>" in html


def test_it_escapes_script_in_step_content(browser, project):
    steps = [{"role": "user", "content": SCRIPT}, {"role": "assistant", "content": IMG}]
    (trajectory,) = load(project, [run(1, steps=steps)])
    html = page(browser, f"/t/{trajectory.pk}/")
    for raw, escaped in ((SCRIPT, SCRIPT_ESCAPED), (IMG, IMG_ESCAPED)):
        assert raw not in html
        assert escaped in html


def test_it_escapes_long_content_and_reasoning(browser, project):
    long = SCRIPT + "x" * LONG_CONTENT
    steps = [{"role": "assistant", "content": long, "reasoning": IMG}]
    (trajectory,) = load(project, [run(1, steps=steps)])
    html = page(browser, f"/t/{trajectory.pk}/")
    assert SCRIPT not in html and IMG not in html
    assert SCRIPT_ESCAPED in html and IMG_ESCAPED in html


def test_it_escapes_tool_names(browser, project):
    steps = [
        {"role": "assistant", "tool_calls": [{"id": "c1", "name": SCRIPT, "arguments": {}}]},
        {"role": "tool", "name": IMG, "tool_call_id": "c1", "content": "ok"},
    ]
    (trajectory,) = load(project, [run(1, steps=steps)])
    html = page(browser, f"/t/{trajectory.pk}/")
    assert SCRIPT not in html and IMG not in html
    assert SCRIPT_ESCAPED in html and IMG_ESCAPED in html


def test_it_escapes_tool_arguments(browser, project):
    calls = [
        {"id": "c1", "name": "search", "arguments": {"query": IMG}},
        {"id": "c2", "name": "search", "arguments": "not json " + SCRIPT},
    ]
    (trajectory,) = load(project, [run(1, steps=[{"role": "assistant", "tool_calls": calls}])])
    html = page(browser, f"/t/{trajectory.pk}/")
    assert SCRIPT not in html and IMG not in html
    assert SCRIPT_ESCAPED in html and IMG_ESCAPED in html


def test_it_escapes_instruction_and_gold_rationale(browser, project):
    labels = {"verdict": "failure", "rationale": SCRIPT, "agent": IMG}
    task = {"id": "t", "instruction": IMG}
    (trajectory,) = load(project, [run(1, task=task, labels=labels)])
    html = page(browser, f"/t/{trajectory.pk}/")
    assert SCRIPT not in html and IMG not in html
    assert SCRIPT_ESCAPED in html and IMG_ESCAPED in html


def test_it_marks_the_gold_first_critical_step(browser, project):
    steps = [{"role": "user", "content": f"step {i}"} for i in range(4)]
    labels = {
        "verdict": "failure",
        "first_critical_step": 2,
        "agent": "Planner",
        "rationale": "Picked the wrong flight.",
        "annotator": "who-and-when",
    }
    (trajectory,) = load(project, [run(1, steps=steps, labels=labels)])
    html = page(browser, f"/t/{trajectory.pk}/")
    assert 'id="step-2" class="step role-user critical" data-step="2"' in html
    assert 'id="step-1" class="step role-user" data-step="1"' in html
    assert html.count("⚑ critical: gold") == 1
    assert 'href="#step-2"' in html
    assert "Planner" in html and "Picked the wrong flight." in html and "who-and-when" in html


def test_it_folds_long_content_into_details(browser, project):
    steps = [
        {"role": "user", "content": "short"},
        {"role": "assistant", "content": "y" * (LONG_CONTENT + 1)},
    ]
    (trajectory,) = load(project, [run(1, steps=steps)])
    html = page(browser, f"/t/{trajectory.pk}/")
    assert html.count('<details class="long">') == 1
    assert f"{LONG_CONTENT + 1} characters" in html
