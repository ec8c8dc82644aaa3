"""Queue order for active learning: by list position, by the critic's uncertainty (least sure
first), or by how far the critic and the LLM judges disagree (most first); items the critic
has not judged come last. Chosen on the queue form."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.db import connection

from annotate.models import Annotation, Assignment, Queue
from annotate.queues import claim_next, complete, create_queue
from curation.models import Membership, Trajectory
from tests.annotate.helpers import client_for, make_member, make_trajectory

STEPS = [{"role": "user", "content": "hi"}] + [{"role": "assistant", "content": "ok"}] * 6


def suggest(trajectory: Trajectory, step: int, confidence: float, name: str = "critic v1"):
    """A critic suggestion: a judge annotation without a verdict."""
    Annotation.objects.create(
        trajectory=trajectory,
        source=Annotation.Source.JUDGE,
        source_name=name,
        verdict="",
        first_critical_step=step,
        confidence=confidence,
    )


def judge(trajectory: Trajectory, step: int, name: str = "gpt v1") -> None:
    Annotation.objects.create(
        trajectory=trajectory,
        source=Annotation.Source.JUDGE,
        source_name=name,
        verdict="failure",
        first_critical_step=step,
        confidence=0.9,
    )


def handed_out(queue: Queue, project) -> list[int]:
    """Each item claimed (and done) by a new annotator, in the order they came."""
    taken = []
    for n in range(10):
        user = make_member(project, f"user-{queue.pk}-{n}")
        trajectory = claim_next(queue, user)
        if trajectory is None:
            return taken
        taken.append(trajectory.pk)
        complete(queue, user, trajectory)
    raise AssertionError("the queue never ran out")


@pytest.fixture
def runs(project) -> list[Trajectory]:
    """Four runs: the critic sure of the first, unsure of the second, middling on the third,
    silent on the fourth; an older critic version was unsure of the first."""
    runs = [make_trajectory(project, STEPS) for _ in range(4)]
    suggest(runs[0], 1, 0.2, name="critic v0")
    suggest(runs[0], 2, 0.9)
    suggest(runs[1], 1, 0.3)
    suggest(runs[2], 3, 0.6)
    judge(runs[0], 2)  # agrees
    judge(runs[1], 5)  # four steps apart
    judge(runs[1], 2, name="claude v1")  # one apart: the largest distance counts
    judge(runs[2], 4)  # one apart
    judge(runs[3], 6)  # no critic to disagree with
    return runs


def test_position_order_is_the_list_order(project, runs) -> None:
    queue = create_queue(project, "q", {}, 1, [], None)
    assert queue.order == Queue.Order.POSITION
    assert handed_out(queue, project) == [t.pk for t in runs]


def test_uncertainty_order_hands_out_what_the_critic_is_least_sure_of_first(project, runs):
    queue = create_queue(project, "q", {}, 1, [], None, Queue.Order.UNCERTAINTY)
    assert handed_out(queue, project) == [runs[1].pk, runs[2].pk, runs[0].pk, runs[3].pk]


def test_disagreement_order_hands_out_the_widest_disagreement_first(project, runs):
    queue = create_queue(project, "q", {}, 1, [], None, Queue.Order.DISAGREEMENT)
    assert handed_out(queue, project) == [runs[1].pk, runs[2].pk, runs[0].pk, runs[3].pk]
    suggest(runs[0], 6, 0.1, name="critic v2")  # a newer critic now disagrees by four
    later = create_queue(project, "later", {}, 1, [], None, Queue.Order.DISAGREEMENT)
    assert handed_out(later, project) == [runs[0].pk, runs[1].pk, runs[2].pk, runs[3].pk]


def test_an_unfinished_claim_comes_back_before_any_order(project, runs) -> None:
    queue = create_queue(project, "q", {}, 2, [], None, Queue.Order.UNCERTAINTY)
    user = make_member(project, "ann")
    assert claim_next(queue, user) == runs[1]
    suggest(runs[3], 1, 0.01)  # now the least sure of all
    assert claim_next(queue, user) == runs[1]
    complete(queue, user, runs[1])
    assert claim_next(queue, user) == runs[3]


def test_the_queue_form_offers_the_order(project, runs) -> None:
    client = client_for(make_member(project, "rita", Membership.Role.RESEARCHER))
    form = client.get("/p/demo/queues/new/").content.decode()
    assert 'value="disagreement"' in form and "critic least sure first" in form
    response = client.post(
        "/p/demo/queues/new/", {"name": "active", "overlap": 1, "order": "uncertainty"}
    )
    assert response.status_code == 302
    queue = Queue.objects.get(name="active")
    assert queue.order == Queue.Order.UNCERTAINTY
    assert "critic least sure first" in client.get(f"/q/{queue.pk}/").content.decode()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_in_critic_order_never_exceed_the_overlap(project) -> None:
    """Four people, two threads each, drain a 30-item queue ordered by uncertainty at once."""
    trajectories = [make_trajectory(project, STEPS) for _ in range(30)]
    for n, trajectory in enumerate(trajectories[:20]):
        suggest(trajectory, 1 + n % 5, (n * 7 % 20) / 20)
    queue = create_queue(project, "q", {}, 2, [], None, Queue.Order.UNCERTAINTY)
    users = [make_member(project, f"user-{n}") for n in range(4)]
    start = threading.Barrier(8)
    errors: list[BaseException] = []

    def work(user) -> None:
        try:
            start.wait()
            while (trajectory := claim_next(queue, user)) is not None:
                complete(queue, user, trajectory)
        except BaseException as error:  # noqa: B036 - reported by the main thread
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(users[n % 4],)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    per_item = Counter(Assignment.objects.values_list("item_id", flat=True))
    assert sorted(per_item.values()) == [2] * 30
    pairs = list(Assignment.objects.values_list("item_id", "annotator_id"))
    assert len(pairs) == len(set(pairs))
