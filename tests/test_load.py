"""bench/load.py, small: annotators claiming, reading, drafting and submitting through a real
gunicorn on the test database lose no submission and overfill no item."""

from __future__ import annotations

from pathlib import Path

import pytest

from annotate.models import Annotation, Assignment
from bench import load
from tests.workers.processes import database_url

ANNOTATORS = 8


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)  # committed, so the server's workers see the data
def test_concurrent_annotators_lose_nothing_and_overfill_nothing(tmp_path: Path) -> None:
    queue, usernames = load.seed(trajectories=200, annotators=ANNOTATORS, overlap=2)
    with load.serve(database_url(), workers=2, threads=1, folder=tmp_path) as server:
        result = load.drive(server.url, queue.pk, usernames, seconds=6)
        log = server.log_tail()
    assert result.errors == {}, f"{load.figures(result)}\ngunicorn's log:\n{log}"
    assert load.check(queue, result).failures() == []
    assert {username for _, username in result.submitted} == set(usernames)


@pytest.mark.django_db
def test_the_checks_see_an_overfilled_item_and_lost_and_unseen_submissions() -> None:
    queue, (ann, bob, cat) = load.seed(trajectories=2, annotators=3, overlap=2)
    first, second = queue.items.order_by("position")
    users = {u.username: u for u in queue.annotators.all()}
    for name in (ann, bob, cat):  # three assignments of an item handed out twice at most
        Assignment.objects.create(item=first, annotator=users[name], status="done")
    Annotation.objects.create(trajectory=first.trajectory, author=users[ann], source="human")
    confirmed = [(first.trajectory_id, ann), (second.trajectory_id, bob)]
    result = load.Result(1.0, {}, {}, confirmed, [(second.trajectory_id, bob)], 0, 0.0)
    checks = load.check(queue, result)
    assert checks.failures() == [
        "1 items over-assigned",
        "1 items with a wrong claims counter",
        "1 items handed again to their annotator",
        "1 submissions lost",
        "2 submissions nobody saw confirmed",
    ]
    assert checks.lost == [(second.trajectory_id, bob)]
    assert checks.unseen == [(first.trajectory_id, bob), (first.trajectory_id, cat)]
