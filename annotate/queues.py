"""Annotation queues: building them from a list filter and handing out items.

- `claim_next(queue, user)`: the next item for `user`, never handing an item out more than
  `queue.overlap` times nor twice to the same person.
- `complete(queue, user, trajectory)`: mark `user`'s assignment of it done.

Open items go out in the queue's `order`: list position; or active learning, where the
learned step critic (workers/critic/) is least sure first (the lowest confidence of its
latest suggestion), or where the critic and the LLM judges disagree most about the first
critical step first (then least sure, then position). Items the critic has not judged come
after those it has. The critic's suggestions are the judge annotations without a verdict:
only the critic backend may leave the verdict out (workers/judging/schema.py).

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
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Abs
from django.utils import timezone

from annotate.models import Annotation, Assignment, Queue, QueueItem
from annotate.views.lists import project_trajectories
from curation.models import Project, Trajectory


def create_queue(
    project: Project,
    name: str,
    filters: dict[str, Any],
    overlap: int,
    annotators: Iterable[AbstractBaseUser],
    created_by: AbstractBaseUser | None,
    order: str = Queue.Order.POSITION,
) -> Queue:
    """A queue of every trajectory the list filter matches, positioned in id order (the page
    cursor is dropped: a queue covers all pages)."""
    filters = {key: value for key, value in filters.items() if key != "after"}
    with transaction.atomic():
        queue = Queue.objects.create(
            project=project,
            name=name,
            filter=filters,
            overlap=overlap,
            created_by=created_by,
            order=order,
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


def critic_suggestions(trajectory: str) -> QuerySet[Annotation]:
    """The critic's suggestions for the outer query's `trajectory` (a field naming a
    trajectory id), latest first."""
    return Annotation.objects.filter(
        trajectory=OuterRef(trajectory),
        source=Annotation.Source.JUDGE,
        author__isnull=True,
        verdict="",
        status=Annotation.Status.SUBMITTED,
    ).order_by("-updated_at", "-id")


def critic_ordered(rows: QuerySet, order: str, trajectory: str = "trajectory_id") -> QuerySet:
    """`rows` (queue items, or trajectories with trajectory="pk") in `order`, each annotated
    with `critic_confidence`, `critic_step` and `judge_distance` (the largest distance in
    steps between the critic's suggested step and an LLM judge's first critical step)."""
    latest = critic_suggestions(trajectory)
    judges = (
        Annotation.objects.filter(
            trajectory=OuterRef(trajectory),
            source=Annotation.Source.JUDGE,
            author__isnull=True,
            first_critical_step__isnull=False,
            status=Annotation.Status.SUBMITTED,
        )
        .exclude(verdict="")
        .annotate(distance=Abs(F("first_critical_step") - OuterRef("critic_step")))
        .order_by("-distance")
    )
    rows = rows.annotate(
        critic_confidence=Subquery(latest.values("confidence")[:1]),
        critic_step=Subquery(latest.values("first_critical_step")[:1]),
    ).annotate(judge_distance=Subquery(judges.values("distance")[:1]))
    tie = "position" if trajectory == "trajectory_id" else "pk"
    least_sure = F("critic_confidence").asc(nulls_last=True)
    if order == Queue.Order.UNCERTAINTY:
        return rows.order_by(least_sure, tie)
    if order == Queue.Order.DISAGREEMENT:
        return rows.order_by(F("judge_distance").desc(nulls_last=True), least_sure, tie)
    return rows.order_by(tie)


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
        open_items = (
            QueueItem.objects.select_for_update(skip_locked=True)
            .only("pk", "trajectory_id")
            .filter(~Exists(had), queue=queue, claims__lt=queue.overlap)
        )
        if queue.order == Queue.Order.POSITION:
            item = open_items.order_by("position").first()
        else:
            item = critic_ordered(open_items, queue.order).first()
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
