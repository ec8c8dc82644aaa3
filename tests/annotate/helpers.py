"""Helpers shared by the annotation workspace tests."""

from __future__ import annotations

import uuid

from django.contrib.auth.models import User
from django.test import Client

from annotate import effective
from annotate.models import Annotation
from curation.models import Membership, Project, Step, Task, Trajectory


def make_member(project: Project, name: str, role: str = Membership.Role.ANNOTATOR) -> User:
    user = User.objects.create_user(name)  # no password: hashing is slow, tests log in by force
    Membership.objects.create(project=project, user=user, role=role)
    return user


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def make_trajectory(project: Project, steps: list[dict], **fields) -> Trajectory:
    """A trajectory of task "t-1" with these steps (dicts of Step fields) and its effective
    label."""
    task, _ = Task.objects.get_or_create(project=project, external_id="t-1")
    trajectory = Trajectory.objects.create(
        project=project,
        task=task,
        source_format="test",
        content_hash=uuid.uuid4().hex,
        step_count=len(steps),
        **fields,
    )
    Step.objects.bulk_create(
        Step(trajectory=trajectory, index=i, **step) for i, step in enumerate(steps)
    )
    effective.refresh([trajectory.pk])
    return trajectory


def label_failure(trajectory: Trajectory, first_critical_step: int, **fields) -> Annotation:
    """A gold label saying the run failed at this step, and the effective label it makes."""
    annotation = Annotation.objects.create(
        trajectory=trajectory,
        source="gold",
        source_name="g",
        verdict="failure",
        first_critical_step=first_critical_step,
        **fields,
    )
    effective.refresh([trajectory.pk])
    return annotation
