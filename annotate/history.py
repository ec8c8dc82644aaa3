"""The history of every label a person saves, and the review page's view of it.

Each save of an annotation or an adjudication through the app writes an `AnnotationChange` in
the save's transaction. Drafts autosave every few seconds while someone types, so a draft save
by the same person within COALESCE of the previous draft row of that annotation is folded into
it: the row then runs from the values before the first of those saves to the values after the
last, and its time moves to the last.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Exists, Q

from annotate.models import Adjudication, Annotation, AnnotationChange
from curation.models import Membership, Trajectory
from curation.permissions import REVIEW_ROLES

ANNOTATION_FIELDS = (
    "verdict",
    "first_critical_step",
    "root_cause_step",
    "responsible_agent",
    "error_category",
    "rationale",
    "confidence",
    "extra",
    "step_labels",
    "status",
)
ADJUDICATION_FIELDS = (
    "verdict",
    "first_critical_step",
    "root_cause_step",
    "error_category",
    "rationale",
)
COALESCE = timedelta(seconds=60)
SHOWN = 100  # rows on the review page, latest first
VALUE_CHARS = 300  # a longer value (a rationale) is cut short on the page
EMPTY: tuple[Any, ...] = ("", None, {}, [])
Action = AnnotationChange.Action
Values = dict[str, Any]


def values_of(label: Annotation | Adjudication) -> Values:
    fields = ANNOTATION_FIELDS if isinstance(label, Annotation) else ADJUDICATION_FIELDS
    return {field: getattr(label, field) for field in fields}


def diff(before: Values | None, after: Values) -> dict[str, list[Any]]:
    """{field: [old, new]} of the fields that changed; for a new label (`before` None) the
    fields it was given a value for."""
    if before is None:
        return {f: [None, v] for f, v in after.items() if v not in EMPTY}
    return {f: [before[f], v] for f, v in after.items() if before[f] != v}


def merge(earlier: dict[str, list[Any]], later: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """Two consecutive rows' changes as one; a field back where it started drops out."""
    merged = dict(earlier)
    for field, (old, new) in later.items():
        merged[field] = [earlier[field][0] if field in earlier else old, new]
    return {
        f: [old, new]
        for f, (old, new) in merged.items()
        if old != new and not (old is None and new in EMPTY)
    }


def _folds_into(last: AnnotationChange | None, user: AbstractBaseUser, at: datetime) -> bool:
    """Whether a draft save by `user` at `at` continues `last`, the annotation's latest row."""
    if last is None or last.user_id != user.pk or at - last.at > COALESCE:
        return False
    status_after = last.changes.get("status", [None, Annotation.Status.DRAFT])[1]
    return last.action in (Action.CREATED, Action.UPDATED) and status_after == "draft"


def record_annotation(
    annotation: Annotation, before: Values | None, user: AbstractBaseUser
) -> AnnotationChange:
    """Record a person's save of `annotation` (already saved; `before`: its values before,
    None if it is new). Call inside the save's transaction."""
    changes = diff(before, values_of(annotation))
    if before is None:
        action = Action.CREATED
    elif annotation.status == Annotation.Status.SUBMITTED:
        action = Action.SUBMITTED
    else:
        action = Action.UPDATED
    at = annotation.updated_at
    if action == Action.UPDATED:
        last = AnnotationChange.objects.filter(annotation=annotation).order_by("-at", "-id").first()
        if last is not None and _folds_into(last, user, at):
            last.changes, last.at = merge(last.changes, changes), at
            last.save(update_fields=["changes", "at"])
            return last
    return AnnotationChange.objects.create(
        trajectory_id=annotation.trajectory_id,
        annotation=annotation,
        user=user,
        at=at,
        action=action,
        changes=changes,
    )


def record_adjudication(
    adjudication: Adjudication, before: Values | None, user: AbstractBaseUser
) -> AnnotationChange:
    """Record a reviewer's save of `adjudication` (already saved); inside its transaction."""
    return AnnotationChange.objects.create(
        trajectory_id=adjudication.trajectory_id,
        adjudication=adjudication,
        user=user,
        at=adjudication.updated_at,
        action=Action.CREATED if before is None else Action.UPDATED,
        changes=diff(before, values_of(adjudication)),
    )


def shown_value(value: Any) -> str:
    if value in EMPTY:
        return "—"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


@dataclass
class ShownChange:
    at: datetime
    who: str
    action: str
    subject: str
    fields: list[tuple[str, str, str]]  # (field, old, new), as text


def _shown(change: AnnotationChange) -> ShownChange:
    if change.adjudication_id:
        subject = "the adjudication"
    elif change.annotation is not None:
        author = change.annotation.author
        subject = f"the annotation of {author.get_username() if author else '?'}"
    else:
        subject = "a label since deleted"
    return ShownChange(
        at=change.at,
        who=change.user.get_username() if change.user else "someone since removed",
        action=change.action,
        subject=subject,
        fields=[(f, shown_value(a), shown_value(b)) for f, (a, b) in change.changes.items()],
    )


class LabelHistory:
    """The label history of a trajectory as `user` may see it: reviewers and admins see every
    change; others the changes of their own annotation and of the adjudication (drafts of other
    annotators stay private). Lazy: one query, run when a template first reads `rows`."""

    def __init__(self, trajectory: Trajectory, user: AbstractBaseUser) -> None:
        self.trajectory = trajectory
        self.user = user

    @cached_property
    def _fetched(self) -> list[AnnotationChange]:
        changes = AnnotationChange.objects.filter(trajectory=self.trajectory)
        if not self.user.is_superuser:
            reviews = Membership.objects.filter(
                project_id=self.trajectory.project_id, user=self.user, role__in=REVIEW_ROLES
            )
            changes = changes.filter(
                Q(annotation__author=self.user) | Q(adjudication__isnull=False) | Q(Exists(reviews))
            )
        changes = changes.select_related("user", "annotation__author").order_by("-at", "-id")
        return list(changes[: SHOWN + 1])

    @cached_property
    def rows(self) -> list[ShownChange]:
        return [_shown(change) for change in self._fetched[:SHOWN]]

    @property
    def truncated(self) -> bool:
        return len(self._fetched) > SHOWN
