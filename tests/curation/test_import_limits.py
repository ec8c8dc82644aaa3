"""Steps per trajectory and characters per step are limited: a record over a limit is reported
like any bad record, naming the limit and where it is, and the good records still land."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from curation.models import Membership, Project, Step, Trajectory

pytestmark = pytest.mark.django_db


def record(name: str, steps: int = 2, chars: int = 5) -> dict:
    return {
        "id": name,
        "task": {"id": f"task-{name}"},
        "steps": [{"role": "user", "content": "x" * chars} for _ in range(steps)],
    }


@pytest.fixture
def api(project: Project) -> APIClient:
    user = User.objects.create_user("rita")
    Membership.objects.create(project=project, user=user, role=Membership.Role.RESEARCHER)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    return client


def test_records_over_the_limits_are_refused_and_the_rest_land(
    api: APIClient, project: Project, settings
) -> None:
    settings.IMPORT_MAX_STEPS = 3
    settings.IMPORT_MAX_STEP_CHARS = 10
    records = [
        record("good"),
        record("long", steps=4),
        record("wide", chars=11),
        record("edge", steps=3, chars=10),
    ]
    body = b"\n".join(json.dumps(r).encode() for r in records)
    response = api.post(
        f"/api/projects/{project.slug}/import/", data=body, content_type="application/x-ndjson"
    )

    assert response.status_code == 422
    summary = response.json()
    assert (summary["created"], summary["failed"]) == (2, 2)
    errors = {e["location"]: e["error"] for e in summary["errors"]}
    assert (
        "steps: 4 steps are over the limit of 3 per trajectory (IMPORT_MAX_STEPS)"
        in (errors["line 2"])
    )
    assert (
        "steps[0]: 11 characters are over the limit of 10 per step (IMPORT_MAX_STEP_CHARS)"
        in (errors["line 3"])
    )
    assert sorted(Trajectory.objects.values_list("external_id", flat=True)) == ["edge", "good"]
    assert Step.objects.count() == 5


def test_the_defaults_take_a_long_trajectory_with_big_tool_output(
    api: APIClient, project: Project
) -> None:
    body = json.dumps(record("big", steps=200, chars=100_000)).encode()
    response = api.post(
        f"/api/projects/{project.slug}/import/", data=body, content_type="application/x-ndjson"
    )
    assert response.status_code == 200, response.content
    assert Trajectory.objects.get().step_count == 200
