"""Importing from the browser: upload, job page with progress, permissions."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from curation.jobs import run_import_job
from curation.models import ImportJob, Membership, Project, Trajectory

RUN = {
    "id": "r1",
    "steps": [{"role": "user", "content": "<script>alert(1)</script>"}],
}


def member(project: Project, role: str) -> Client:
    user = User.objects.create_user(role, password="pw")
    Membership.objects.create(project=project, user=user, role=role)
    client = Client()
    client.force_login(user)
    return client


def upload(body: bytes, name: str = "runs.jsonl") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, body, content_type="application/octet-stream")


@pytest.mark.django_db(transaction=True)
def test_an_upload_becomes_a_job_whose_page_shows_the_result(project: Project) -> None:
    client = member(project, "researcher")
    body = (json.dumps(RUN) + "\n{oops\n").encode()
    response = client.post(f"/p/{project.slug}/import/", {"file": upload(body), "agent_model": "m"})
    job = ImportJob.objects.get()
    assert response.status_code == 302 and response.url == f"/imports/{job.pk}/"
    assert job.status == "queued" and job.agent_model == "m"

    waiting = client.get(response.url)
    assert b'hx-trigger="every 1s"' in waiting.content

    run_import_job(job.pk)
    done = client.get(response.url, HTTP_HX_REQUEST="true")
    assert done.status_code == 200
    text = done.content.decode()
    assert "every 1s" not in text  # polling stops once the job is over
    assert "1 trajectories imported" in text
    assert "line 2" in text and "invalid JSON" in text
    assert Trajectory.objects.get(project=project).agent_model == "m"


def test_the_form_says_what_is_missing(project: Project) -> None:
    client = member(project, "researcher")
    response = client.post(f"/p/{project.slug}/import/", {})
    assert response.status_code == 200
    assert b"This field is required" in response.content
    assert not ImportJob.objects.exists()


def test_only_admins_and_researchers_may_import(project: Project) -> None:
    annotator = member(project, "annotator")
    assert annotator.get(f"/p/{project.slug}/import/").status_code == 403
    assert b"Import runs" not in annotator.get(f"/p/{project.slug}/").content
    outsider = Client()
    outsider.force_login(User.objects.create_user("otto", password="pw"))
    assert outsider.get(f"/p/{project.slug}/import/").status_code == 404
    job = ImportJob.objects.create(project=project, upload=upload(b"{}"), original_name="x")
    assert outsider.get(f"/imports/{job.pk}/").status_code == 404
    assert Client().get(f"/imports/{job.pk}/").status_code == 302
