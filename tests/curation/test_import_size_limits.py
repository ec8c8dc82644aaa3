"""Request and upload size limits: an API import body over IMPORT_MAX_REQUEST_BYTES is answered
413 naming the limit, an upload over IMPORT_MAX_UPLOAD_BYTES is a form error; nothing is stored
unless the message says what landed (a chunked body cut at the limit)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import AsyncClient, Client
from django.test.client import FakePayload
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from curation.models import ImportJob, Membership, Project, Step, Trajectory

pytestmark = pytest.mark.django_db


def body_of(count: int) -> bytes:
    """`count` JSON lines of about 1 kB each."""
    records = (
        {"id": f"r{i}", "task": {"id": "t"}, "steps": [{"role": "user", "content": "x" * 1000}]}
        for i in range(count)
    )
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


@pytest.fixture
def token(project: Project) -> str:
    user = User.objects.create_user("rita", password="pw")
    Membership.objects.create(project=project, user=user, role=Membership.Role.RESEARCHER)
    return Token.objects.create(user=user).key


@pytest.fixture
def api(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def stored_files(settings) -> list[Path]:
    return [p for p in Path(settings.MEDIA_ROOT).rglob("*") if p.is_file()]


@pytest.mark.parametrize("query", ["", "?async=1"])
def test_a_body_whose_length_is_over_the_limit_is_refused_unread(
    api: APIClient, project: Project, settings, query: str
) -> None:
    body = body_of(20)
    settings.IMPORT_MAX_REQUEST_BYTES = len(body) - 1
    response = api.post(
        f"/api/projects/{project.slug}/import/{query}",
        data=body,
        content_type="application/x-ndjson",
    )
    assert response.status_code == 413
    answer = response.json()
    assert answer["setting"] == "IMPORT_MAX_REQUEST_BYTES"
    assert answer["limit"] == len(body) - 1 and answer["cut"] is False
    assert f"over the limit of {len(body) - 1} bytes" in answer["detail"]
    assert "IMPORT_MAX_REQUEST_BYTES" in answer["detail"] and "Nothing" in answer["detail"]
    assert not Trajectory.objects.exists() and not ImportJob.objects.exists()
    assert stored_files(settings) == []


def test_a_multipart_upload_over_the_limit_is_refused(
    api: APIClient, project: Project, settings
) -> None:
    settings.IMPORT_MAX_REQUEST_BYTES = 1000
    upload = SimpleUploadedFile("runs.jsonl", body_of(20))
    response = api.post(f"/api/projects/{project.slug}/import/", {"file": upload})
    assert response.status_code == 413
    assert "IMPORT_MAX_REQUEST_BYTES" in response.json()["detail"]
    assert not Trajectory.objects.exists()


@pytest.mark.parametrize("query", ["", "?async=1"])
def test_a_body_at_the_limit_is_imported(
    api: APIClient, project: Project, settings, query: str
) -> None:
    body = body_of(20)
    settings.IMPORT_MAX_REQUEST_BYTES = len(body)
    response = api.post(
        f"/api/projects/{project.slug}/import/{query}",
        data=body,
        content_type="application/x-ndjson",
    )
    if query:
        assert response.status_code == 202
        assert ImportJob.objects.get().upload.read() == body
    else:
        assert response.status_code == 200, response.content
        assert Trajectory.objects.count() == 20


def post_chunked(token: str, path: str, body: bytes) -> tuple[int, dict]:
    """POST `body` through the ASGI handler with no Content-Length (as a chunked request
    reaches it), so the view can only count the bytes as it reads them."""
    response = async_to_sync(AsyncClient().request)(
        method="POST",
        path=path.split("?")[0],
        query_string=path.partition("?")[2],
        headers=[
            (b"host", b"testserver"),
            (b"content-type", b"application/x-ndjson"),
            (b"authorization", f"Token {token}".encode()),
        ],
        _body_file=FakePayload(body),
    )
    return response.status_code, json.loads(response.content)


def test_a_chunked_body_is_cut_at_the_limit_and_says_what_landed(
    token: str, project: Project, settings
) -> None:
    settings.IMPORT_BATCH_SIZE = 5
    body = body_of(40)
    settings.IMPORT_MAX_REQUEST_BYTES = len(body) // 2
    code, answer = post_chunked(token, f"/api/projects/{project.slug}/import/", body)

    assert code == 413
    assert answer["cut"] is True and answer["setting"] == "IMPORT_MAX_REQUEST_BYTES"
    assert "the import was cut there" in answer["detail"]
    landed = answer["summary"]["created"]
    assert 0 < landed < 20  # whole batches written before the limit, nothing past it
    assert landed % 5 == 0
    assert f"{landed} created" in answer["detail"]
    assert Trajectory.objects.count() == landed and Step.objects.count() == landed

    # Sending the rest (here: everything again, under a raised limit) completes the import.
    settings.IMPORT_MAX_REQUEST_BYTES = len(body)
    code, answer = post_chunked(token, f"/api/projects/{project.slug}/import/", body)
    assert code == 200
    assert (answer["created"], answer["duplicates"]) == (40 - landed, landed)


def test_a_chunked_body_for_a_queued_import_stores_nothing_past_the_limit(
    token: str, project: Project, settings
) -> None:
    body = body_of(40)
    settings.IMPORT_MAX_REQUEST_BYTES = len(body) // 2
    code, answer = post_chunked(token, f"/api/projects/{project.slug}/import/?async=1", body)
    assert code == 413 and answer["cut"] is False
    assert "Nothing was stored" in answer["detail"]
    assert not ImportJob.objects.exists() and stored_files(settings) == []

    code, answer = post_chunked(token, f"/api/projects/{project.slug}/import/?async=1", body[:500])
    assert code == 202
    assert ImportJob.objects.get().upload.read() == body[:500]


def browser(project: Project) -> Client:
    user = User.objects.create_user("ray", password="pw")
    Membership.objects.create(project=project, user=user, role=Membership.Role.RESEARCHER)
    client = Client()
    client.force_login(user)
    return client


def test_an_upload_over_the_limit_is_a_form_error(project: Project, settings) -> None:
    settings.IMPORT_MAX_UPLOAD_BYTES = 1000
    body = body_of(20)
    response = browser(project).post(
        f"/p/{project.slug}/import/", {"file": SimpleUploadedFile("runs.jsonl", body)}
    )
    assert response.status_code == 200
    text = response.content.decode()
    assert f"The file is {len(body)} bytes, over the limit of 1000 bytes per upload" in text
    assert "IMPORT_MAX_UPLOAD_BYTES" in text
    assert not ImportJob.objects.exists() and stored_files(settings) == []


def test_an_upload_at_the_limit_becomes_a_job(project: Project, settings) -> None:
    body = body_of(20)
    settings.IMPORT_MAX_UPLOAD_BYTES = len(body)
    response = browser(project).post(
        f"/p/{project.slug}/import/", {"file": SimpleUploadedFile("runs.jsonl", body)}
    )
    assert response.status_code == 302
    assert ImportJob.objects.get().upload.read() == body
