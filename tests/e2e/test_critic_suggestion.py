"""In the browser: the review page puts the step cursor on the critic's suggested step and shows
it as a placeholder, and the step becomes the annotator's label only when they mark it."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import User

from annotate.models import Annotation
from curation.models import Membership, Project
from tests.e2e.conftest import log_in
from tests.workers.critic_data import add_run
from workers.critic import jobs
from workers.judging import runs


@pytest.mark.django_db(transaction=True)
def test_the_suggested_step_is_preselected_but_never_saved_unasked(page, live_server) -> None:
    project = Project.objects.create(slug="demo", name="Demo")
    for i in range(8):
        add_run(project, i)
    trajectory = add_run(project, 20, gold=False)
    critic = jobs.train(jobs.request(project, encoder="hashing", send=False).pk)
    runs.judge(jobs.use_as_judge(critic, None).current_version.pk, [trajectory.pk])
    step = Annotation.objects.get(
        trajectory=trajectory, source_name="critic v1"
    ).first_critical_step
    annotator = User.objects.create_user("ann", password="pw")
    Membership.objects.create(project=project, user=annotator, role="annotator")

    tab = page.page
    log_in(tab, live_server, "ann", "pw")
    tab.goto(f"{live_server.url}/t/{trajectory.pk}/")
    suggested = tab.locator(f"#step-{step}")
    assert "current" in suggested.get_attribute("class")
    assert "suggested" in suggested.get_attribute("class")
    field = tab.locator("input[name='first_critical_step']")
    assert field.input_value() == ""
    assert field.get_attribute("placeholder") == f"suggested: {step}"
    time.sleep(1.5)  # longer than the autosave delay: nothing may have been saved
    assert not Annotation.objects.filter(author=annotator).exists()

    tab.locator("body").press("c")  # the annotator agrees
    assert field.input_value() == str(step)
    tab.wait_for_selector("#annotation-state .state.saved", timeout=10_000)  # autosaved
    draft = Annotation.objects.get(author=annotator)
    assert (draft.source, draft.status, draft.first_critical_step) == ("human", "draft", step)
    assert page.dialogs == [] and page.outside == []
