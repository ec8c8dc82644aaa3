"""Two sessions saving one annotation at once on the real database: one wins, none overwrites."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from annotate.models import Annotation
from annotate.views.annotation import STALE
from tests.annotate.test_annotation_form import FAILURE, client_for, make_member, make_trajectory


def race(trajectory, user, forms: list[dict[str, Any]]) -> list[str]:
    """Post each form from its own session and thread, all released at once; the answers."""
    clients = [client_for(user) for _ in forms]
    barrier = threading.Barrier(len(forms))
    answers: list[str] = [""] * len(forms)

    def save(n: int) -> None:
        try:
            barrier.wait()
            response = clients[n].post(
                f"/t/{trajectory.pk}/annotation/", forms[n], HTTP_HX_REQUEST="true"
            )
            answers[n] = response.content.decode()
        finally:
            connection.close()

    threads = [threading.Thread(target=save, args=(n,)) for n in range(len(forms))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("intent", ["draft", "submit"])
def test_of_two_saves_at_the_same_version_exactly_one_wins(project, intent):
    trajectory = make_trajectory(project)
    alice = make_member(project, "alice")
    Annotation.objects.create(
        trajectory=trajectory, author=alice, source="human", status="draft", version=1
    )
    forms = [
        {**FAILURE, "version": 1, "intent": intent, "rationale": f"session {n}"} for n in range(2)
    ]
    answers = race(trajectory, alice, forms)
    winners = [n for n, html in enumerate(answers) if STALE not in html]
    assert len(winners) == 1
    assert "saved" in answers[winners[0]] or "Submitted" in answers[winners[0]]
    annotation = Annotation.objects.get(author=alice)
    assert annotation.version == 2
    assert annotation.rationale == f"session {winners[0]}"


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_of_two_first_saves_exactly_one_creates_the_annotation(project):
    trajectory = make_trajectory(project)
    alice = make_member(project, "alice")
    forms = [{"version": 0, "rationale": f"session {n}"} for n in range(2)]
    answers = race(trajectory, alice, forms)
    winners = [n for n, html in enumerate(answers) if STALE not in html]
    assert len(winners) == 1
    annotation = Annotation.objects.get(author=alice)
    assert (annotation.version, annotation.rationale) == (1, f"session {winners[0]}")
