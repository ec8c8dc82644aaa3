"""Annotation queues: building them from a list filter and handing out items.

- `claim_next(queue, user)`: the next item for `user`, never handing an item out more than
  `queue.overlap` times nor twice to the same person.
- `complete(queue, user, trajectory)`: mark `user`'s assignment of it done.

Claims are safe under concurrency: on PostgreSQL the open item is taken with
`SELECT ... FOR UPDATE SKIP LOCKED`, so concurrent annotators never wait on each other nor
take the same row; on SQLite every transaction starts IMMEDIATE (config/settings.py), so
claims run one at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet
from django.utils import timezone

from annotate.models import Assignment, Queue, QueueItem
from annotate.views.lists import project_trajectories
from curation.models import Project, Trajectory


def create_queue(
    project: Project,
    name: str,
    filters: dict[str, Any],
    overlap: int,
    annotators: Iterable[AbstractBaseUser],
    created_by: AbstractBaseUser | None,
) -> Queue:
    """A queue of every trajectory the list filter matches, in id order (the page cursor is
    dropped: a queue covers all pages)."""
    filters = {key: value for key, value in filters.items() if key != "after"}
    with transaction.atomic():
        queue = Queue.objects.create(
            project=project, name=name, filter=filters, overlap=overlap, created_by=created_by
        )
        queue.annotators.set(annotators)
        insert_items(queue, project_trajectories(project, filters))
    return queue


def insert_items(queue: Queue, trajectories: QuerySet[Trajectory]) -> None:
    """One INSERT ... SELECT: positions follow trajectory ids and no row leaves the database."""
    matched, params = trajectories.order_by().values("id").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {QueueItem._meta.db_table} (queue_id, trajectory_id, position, claims) "
            f"SELECT %s, id, ROW_NUMBER() OVER (ORDER BY id) - 1, 0 FROM ({matched}) AS matched",
            [queue.pk, *params],
        )


def may_claim(queue: Queue, user: AbstractBaseUser) -> bool:
    """Whether `user` may take items: anyone the queue lists, or anybody when it lists nobody
    (project membership is the caller's check). Uses prefetched `annotators` when there."""
    listed = queue.annotators.all()
    return not listed or user in listed


def claim_next(queue: Queue, user: AbstractBaseUser) -> Trajectory | None:
    """The user's unfinished item if there is one, else the first open item they have not had
    (claimed here and now), or None when nothing is left for them or the queue is closed."""
    if not queue.is_active:
        return None
    with transaction.atomic():
        # One claim at a time per user, so two tabs get the same item rather than two.
        get_user_model().objects.select_for_update(no_key=True).filter(pk=user.pk).exists()
        own = (
            Assignment.objects.filter(
                item__queue=queue, annotator=user, status=Assignment.Status.CLAIMED
            )
            .select_related("item__trajectory")
            .order_by("item__position")
            .first()
        )
        if own is not None:
            return own.item.trajectory
        had = Assignment.objects.filter(item=OuterRef("pk"), annotator=user)
        item = (
            QueueItem.objects.select_for_update(skip_locked=True)
            .only("pk", "trajectory_id")
            .filter(~Exists(had), queue=queue, claims__lt=queue.overlap)
            .order_by("position")
            .first()
        )
        if item is None:
            return None
        Assignment.objects.create(item=item, annotator=user)
        QueueItem.objects.filter(pk=item.pk).update(claims=F("claims") + 1)
    return item.trajectory


def complete(queue: Queue, user: AbstractBaseUser, trajectory: Trajectory) -> None:
    """Mark the user's assignment of `trajectory` in `queue` done; done stays done."""
    Assignment.objects.filter(
        item__queue=queue,
        item__trajectory=trajectory,
        annotator=user,
        status=Assignment.Status.CLAIMED,
    ).update(status=Assignment.Status.DONE, done_at=timezone.now())


@dataclass(frozen=True)
class AnnotatorProgress:
    annotator: AbstractBaseUser
    claimed: int  # taken and not done yet
    done: int


@dataclass(frozen=True)
class QueueProgress:
    items: int
    items_done: int  # items whose done assignments reach the overlap
    annotators: list[AnnotatorProgress]

    @property
    def percent(self) -> int:
        return 100 * self.items_done // self.items if self.items else 100


def overall(queue: Queue) -> tuple[int, int]:
    """(items, items fully done) in one query."""
    done = Count("assignments", filter=Q(assignments__status=Assignment.Status.DONE))
    counts = (
        queue.items.annotate(done=done)
        .order_by()
        .aggregate(items=Count("pk"), items_done=Count("pk", filter=Q(done__gte=queue.overlap)))
    )
    return counts["items"], counts["items_done"]


def progress(queue: Queue) -> QueueProgress:
    """Overall and per-annotator progress; listed annotators who took nothing count as 0/0."""
    counts = {
        row["annotator"]: row
        for row in Assignment.objects.filter(item__queue=queue)
        .values("annotator")
        .annotate(
            claimed=Count("pk", filter=Q(status=Assignment.Status.CLAIMED)),
            done=Count("pk", filter=Q(status=Assignment.Status.DONE)),
        )
        .order_by()
    }
    users = (
        get_user_model().objects.filter(Q(pk__in=counts) | Q(annotation_queues=queue)).distinct()
    )
    annotators = [
        AnnotatorProgress(
            annotator=user,
            claimed=counts.get(user.pk, {}).get("claimed", 0),
            done=counts.get(user.pk, {}).get("done", 0),
        )
        for user in users.order_by(get_user_model().USERNAME_FIELD)
    ]
    items, items_done = overall(queue)
    return QueueProgress(items=items, items_done=items_done, annotators=annotators)
