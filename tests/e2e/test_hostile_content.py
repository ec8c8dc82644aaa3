"""Hostile trajectory text stays inert in the browser: no script runs, nothing leaves."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from curation.formats.reading import RawItem
from curation.ingest import import_items
from curation.models import Membership, Project, Trajectory
from tests import hostile
from tests.e2e.conftest import log_in

HOSTILE = [
    "<script>alert('script')</script>",
    "<img src=x onerror=\"alert('img')\">",
    "[click me](javascript:alert('link'))",
    "<svg onload=alert('svg')></svg>",
    '<a href="http://evil.example/steal">away</a><img src="http://evil.example/pixel.png">',
]


@pytest.mark.django_db(transaction=True)
def test_hostile_content_is_shown_as_text_and_runs_nothing(page, live_server) -> None:
    project = Project.objects.create(slug="hostile", name="Hostile")
    user = User.objects.create_user("ann", password="pw")
    Membership.objects.create(project=project, user=user, role="annotator")
    record = {
        "id": "evil",
        "task": {"id": "t", "instruction": HOSTILE[0]},
        "steps": [{"role": "user", "content": text} for text in HOSTILE]
        + [
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "name": "<img src=x onerror=alert('tool')>", "arguments": {}}
                ],
            }
        ],
    }
    import_items(project, [RawItem("test", "item 0", record)])
    trajectory = Trajectory.objects.get()

    log_in(page.page, live_server, "ann", "pw")
    page.page.goto(f"{live_server.url}/t/{trajectory.pk}/")
    page.page.wait_for_load_state("networkidle")

    assert page.dialogs == []
    assert page.outside == []
    body = page.page.inner_text("main")
    assert "<script>alert('script')</script>" in body
    assert "onerror" in body
    assert page.page.locator("main script, main img, main svg").count() == 0


@pytest.mark.parametrize(
    "name", ["markup", "broken-html", "nested-arguments", "injection", "big-step"]
)
@pytest.mark.django_db(transaction=True)
def test_corpus_trajectories_run_nothing_and_leave_the_page_usable(
    page, live_server, name: str
) -> None:
    assert_usable(page, live_server, hostile.STORABLE[name])


@pytest.mark.django_db(transaction=True)
def test_a_10_mb_step_leaves_the_page_usable(page, live_server, settings) -> None:
    settings.IMPORT_MAX_STEP_CHARS = 11 * 1024 * 1024
    content = hostile.SCRIPT + "x" * (10 * 1024 * 1024) + hostile.SCRIPT
    steps = [{"role": "user", "content": "go"}, {"role": "tool", "content": content}]
    assert_usable(page, live_server, {"id": "ten-mb", "steps": steps})


def assert_usable(page, live_server, record: dict) -> None:
    """The record's list and review pages show, fully scrolled and unfolded, with no script
    run, no dialog and no request leaving."""
    project = Project.objects.create(slug="hostile", name="Hostile")
    user = User.objects.create_user("ann", password="pw")
    Membership.objects.create(project=project, user=user, role="annotator")
    import_items(project, [RawItem("corpus", "item 0", record)])
    trajectory = Trajectory.objects.get()

    log_in(page.page, live_server, "ann", "pw")
    for path in (f"/p/{project.slug}/", f"/t/{trajectory.pk}/"):
        page.page.goto(f"{live_server.url}{path}")
        page.page.wait_for_load_state("networkidle")
        assert page.page.locator("main").is_visible()  # no injected style hid the page
    for details in page.page.locator("main details").all():
        details.evaluate("element => { element.open = true; }")  # show folded content too
    steps = page.page.locator("main li.step")
    assert steps.count() == len(record["steps"])
    steps.last.scroll_into_view_if_needed()
    assert steps.last.is_visible()

    assert page.dialogs == []
    assert page.outside == []
    assert page.page.locator("main script, main img, main svg, main iframe").count() == 0
