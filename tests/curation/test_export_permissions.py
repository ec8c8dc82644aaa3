"""Researchers and admins of a project may export it and fetch the files; its annotators and
reviewers may not (403), and people outside it do not see it at all (404)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from rest_framework.test import APIClient

from curation.models import DatasetExport, Project
from tests.curation.export_helpers import export, load, member, record

pytestmark = pytest.mark.django_db

BODY = {"kind": "sft", "format": "jsonl", "test_fraction": "0.1", "dedup": "on"}


@pytest.fixture
def done(project: Project) -> DatasetExport:
    load(project, [record(1, "t1", True)])
    return export(project, "sft", test_fraction=0)


def outsider(project: Project) -> User:
    elsewhere = Project.objects.create(slug="elsewhere", name="Elsewhere")
    return member(elsewhere, "admin", name="outsider")


def users(project: Project) -> dict[str, User]:
    return {
        "admin": member(project, "admin"),
        "researcher": member(project, "researcher"),
        "reviewer": member(project, "reviewer"),
        "annotator": member(project, "annotator"),
        "outsider": outsider(project),
        "superuser": User.objects.create_superuser("root", password="pw"),
    }


EXPECTED = {  # who: (status of the page and of its POST, status of the file)
    "admin": (200, 200),
    "researcher": (200, 200),
    "superuser": (200, 200),
    "reviewer": (403, 403),
    "annotator": (403, 403),
    "outsider": (404, 404),
}


def test_pages_and_downloads(project, done):
    for who, user in users(project).items():
        client = Client()
        client.force_login(user)
        page, download = EXPECTED[who]
        assert client.get(f"/p/{project.slug}/exports/").status_code == page, who
        posted = client.post(f"/p/{project.slug}/exports/", BODY)
        assert posted.status_code == (302 if page == 200 else page), who
        assert client.get(f"/exports/{done.pk}/").status_code == download, who
        file = client.get(f"/exports/{done.pk}/files/train.jsonl")
        assert file.status_code == download, who
        rerun = client.post(f"/exports/{done.pk}/rerun/")
        assert rerun.status_code == (302 if download == 200 else download), who
    # the three people allowed started one export each and re-ran one each
    assert DatasetExport.objects.filter(created_by__isnull=False).count() == 6


def test_api(project, done):
    for who, user in users(project).items():
        client = APIClient()
        client.force_authenticate(user)
        page, download = EXPECTED[who]
        listing = client.get(f"/api/projects/{project.slug}/exports/")
        assert listing.status_code == page, who
        started = client.post(
            f"/api/projects/{project.slug}/exports/", {"kind": "sft"}, format="json"
        )
        assert started.status_code == (202 if page == 200 else page), who
        assert client.get(f"/api/exports/{done.pk}/").status_code == download, who
        assert client.get(f"/api/exports/{done.pk}/files/train.jsonl").status_code == download


def test_anonymous_people_are_sent_to_log_in(project, done):
    client = Client()
    assert client.get(f"/p/{project.slug}/exports/").status_code == 302
    assert client.get(f"/exports/{done.pk}/files/train.jsonl").status_code == 302
    assert APIClient().get(f"/api/exports/{done.pk}/").status_code in (401, 403)
