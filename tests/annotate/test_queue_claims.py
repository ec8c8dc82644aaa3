"""Handing out queue items: the overlap, nobody twice, unfinished claims first, concurrency."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.contrib.auth.models import User
from django.db import connection

from annotate.models import Assignment, QueueItem
from annotate.queues import claim_next, complete, create_queue
from tests.annotate.test_queues import make_member, make_trajectories


@pytest.fixture
def users(project) -> list[User]:
    return [make_member(project, f"user-{n}") for n in range(4)]


def drain(queue, user: User) -> list[int]:
    """Claim and complete until nothing is left; the trajectory ids handed out, in order."""
    taken = []
    while (trajectory := claim_next(queue, user)) is not None:
        taken.append(trajectory.pk)
        complete(queue, user, trajectory)
    return taken


def test_items_go_out_in_position_order_and_count_their_claims(project, users):
    trajectories = make_trajectories(project, 3)
    queue = create_queue(project, "q", {}, 1, [], None)
    assert drain(queue, users[0]) == [t.pk for t in trajectories]
    assert list(queue.items.values_list("claims", flat=True)) == [1, 1, 1]


def test_an_item_goes_to_at_most_overlap_people(project, users):
    (trajectory,) = make_trajectories(project, 1)
    queue = create_queue(project, "q", {}, 2, [], None)
    assert claim_next(queue, users[0]) == trajectory
    assert claim_next(queue, users[1]) == trajectory
    assert claim_next(queue, users[2]) is None
    assert QueueItem.objects.get().claims == 2
    assert Assignment.objects.count() == 2


def test_nobody_gets_the_same_item_twice(project, users):
    trajectories = make_trajectories(project, 3)
    queue = create_queue(project, "q", {}, 3, [], None)
    assert drain(queue, users[0]) == [t.pk for t in trajectories]
    assert claim_next(queue, users[0]) is None  # items still open for others, not for them
    assert drain(queue, users[1]) == [t.pk for t in trajectories]


def test_an_unfinished_claim_comes_back_before_anything_new(project, users):
    first, _second = make_trajectories(project, 2)
    queue = create_queue(project, "q", {}, 1, [], None)
    assert claim_next(queue, users[0]) == first
    assert claim_next(queue, users[0]) == first
    assert Assignment.objects.count() == 1
    assert list(queue.items.values_list("claims", flat=True)) == [1, 0]


def test_claims_in_one_queue_leave_other_queues_alone(project, users):
    (trajectory,) = make_trajectories(project, 1)
    one = create_queue(project, "one", {}, 1, [], None)
    two = create_queue(project, "two", {}, 1, [], None)
    assert claim_next(one, users[0]) == trajectory
    assert claim_next(two, users[0]) == trajectory  # a claim in `one` is no claim in `two`
    complete(one, users[0], trajectory)
    assert Assignment.objects.get(item__queue=two).status == Assignment.Status.CLAIMED


THREADS = 8
ITEMS = 40
OVERLAP = 2


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_never_exceed_the_overlap_nor_repeat_a_person(project, users):
    """8 threads, two per user, drain one queue at once, each on its own connection."""
    make_trajectories(project, ITEMS)
    queue = create_queue(project, "q", {}, OVERLAP, [], None)
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []

    def work(user: User) -> None:
        try:
            start.wait()
            drain(queue, user)
        except BaseException as error:  # noqa: B036 - reported by the main thread
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=work, args=(users[n % len(users)],)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    per_item = Counter(Assignment.objects.values_list("item_id", flat=True))
    assert sorted(per_item.values()) == [OVERLAP] * ITEMS
    assert list(queue.items.values_list("claims", flat=True)) == [OVERLAP] * ITEMS
    pairs = list(Assignment.objects.values_list("item_id", "annotator_id"))
    assert len(pairs) == len(set(pairs))
    assert not Assignment.objects.exclude(status=Assignment.Status.DONE).exists()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_claims_by_one_person_all_get_their_one_claim(project, users):
    """Like a double click or several tabs: one assignment, the same item for every request."""
    make_trajectories(project, ITEMS)
    queue = create_queue(project, "q", {}, OVERLAP, [], None)
    start = threading.Barrier(THREADS)
    got: list[int | BaseException] = []

    def work() -> None:
        try:
            start.wait()
            got.append(claim_next(queue, users[0]).pk)
        except BaseException as error:  # noqa: B036 - reported by the main thread
            got.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert len(set(got)) == 1 and isinstance(got[0], int), got
    assert Assignment.objects.count() == 1
