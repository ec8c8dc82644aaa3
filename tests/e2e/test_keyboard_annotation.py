"""An annotator labels a Who&When run from a queue with the keyboard only."""

from __future__ import annotations

import copy
import time

import pytest
from django.contrib.auth.models import User

from annotate.models import Annotation, Assignment, EffectiveLabel
from annotate.queues import create_queue
from curation.formats.reading import RawItem
from curation.ingest import import_items
from curation.models import Membership, Project, Trajectory
from tests.curation.helpers import WHO_AND_WHEN_HAND_CRAFTED
from tests.e2e.conftest import log_in


def wait_for(condition, seconds: float = 10) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("the page did not get there in time")
        time.sleep(0.1)


@pytest.mark.django_db(transaction=True)
def test_an_annotator_labels_a_queued_run_without_the_mouse(page, live_server) -> None:
    project = Project.objects.create(slug="ww", name="Who&When")
    annotator = User.objects.create_user("ann", password="pw")
    Membership.objects.create(project=project, user=annotator, role="annotator")
    log = copy.deepcopy(WHO_AND_WHEN_HAND_CRAFTED)
    log["history"][2]["content"] = "<img src=x onerror=alert('xss')> searching"
    import_items(project, [RawItem("7.json", "", log)])
    trajectory = Trajectory.objects.get()
    queue = create_queue(project, "failures", {}, 1, [annotator], annotator)

    browser = page.page
    log_in(browser, live_server, "ann", "pw")
    browser.goto(f"{live_server.url}/q/{queue.pk}/next/")
    browser.wait_for_url(f"**/t/{trajectory.pk}/?queue={queue.pk}")
    body = browser.locator("body")

    for key in "jjjj":  # step 0, 1, 2, 3
        body.press(key)
    body.press("c")  # the WebSurfer step is the first critical error
    body.press("k")
    body.press("r")  # the failure root is one step earlier
    body.press("4")  # category 4 of the default taxonomy
    body.press("s")

    def submitted() -> bool:
        return Annotation.objects.filter(author=annotator, status="submitted").exists()

    wait_for(submitted)
    annotation = Annotation.objects.get(author=annotator)
    assert annotation.verdict == "failure"
    assert (annotation.first_critical_step, annotation.root_cause_step) == (3, 2)
    assert annotation.error_category == project.categories[3] == "wrong_tool"
    assert Assignment.objects.get(annotator=annotator).status == "done"
    label = EffectiveLabel.objects.get(trajectory=trajectory)
    assert (label.first_critical_step, label.humans_disagree) == (3, False)

    body.press("n")
    browser.wait_for_url(f"**/q/{queue.pk}/next/")
    assert "finished" in browser.inner_text("main").lower()
    assert page.dialogs == [] and page.outside == []
