"""The browser flow: configure an export, watch it run, download its files, run it again."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from curation.exports.runner import run_export
from curation.models import DatasetExport
from tests.curation.export_helpers import correct, judge, load, member, record, stored

pytestmark = pytest.mark.django_db

FORM = {"kind": "preference", "format": "jsonl", "test_fraction": "0", "dedup": "on"}


@pytest.fixture
def client(project) -> Client:
    success, failure = load(project, [record(1, "t1", True), record(2, "t1", False)])
    judge(failure, "failure", 4)
    correct(failure, 4, [{"role": "assistant", "content": "fixed"}])
    client = Client()
    client.force_login(member(project, "researcher"))
    return client


def test_a_dpo_dataset_from_the_browser(project, client):
    page = client.get(f"/p/{project.slug}/exports/")
    assert page.status_code == 200
    assert b'name="kind"' in page.content and b"No exports yet" in page.content

    started = client.post(f"/p/{project.slug}/exports/", {**FORM, "pairs": ["corrections"]})
    export = DatasetExport.objects.get()
    assert started.status_code == 302 and started.url == f"/exports/{export.pk}/"
    assert export.status == "queued" and export.filter["pairs"] == ["corrections"]
    waiting = client.get(started.url)
    assert b'hx-trigger="every 1s"' in waiting.content

    run_export(export.pk)
    done = client.get(started.url, HTTP_HX_REQUEST="true")
    text = done.content.decode()
    assert "every 1s" not in text  # polling stops once the export is over
    assert "1 rows (1 train, 0 test)" in text
    assert "First version of this filter." in text
    assert f'href="/exports/{export.pk}/files/train.jsonl"' in text

    download = client.get(f"/exports/{export.pk}/files/train.jsonl")
    assert download["Content-Disposition"] == 'attachment; filename="train.jsonl"'
    body = b"".join(download.streaming_content)
    assert body == stored(DatasetExport.objects.get())["train.jsonl"].read_bytes()
    assert json.loads(body)["chosen"][0]["content"] == "fixed"
    assert client.get(f"/exports/{export.pk}/files/secrets.txt").status_code == 404

    again = client.post(f"/exports/{export.pk}/rerun/")
    second = DatasetExport.objects.exclude(pk=export.pk).get()
    assert again.url == f"/exports/{second.pk}/" and second.version == 2
    run_export(second.pk)
    assert b"Same content as the previous version." in client.get(again.url).content
    listing = client.get(f"/p/{project.slug}/exports/").content.decode()
    assert "v1" in listing and "v2" in listing and "unchanged" in listing


def test_a_failed_export_shows_its_error(project, client):
    export = DatasetExport.objects.create(
        project=project, kind="sft", filter={"tasks": ["gone"]}, filter_key="x", version=1
    )
    run_export(export.pk)
    text = client.get(f"/exports/{export.pk}/").content.decode()
    assert "Failed" in text and "no task &#x27;gone&#x27;" in text
    assert "every 1s" not in text


def test_filter_values_are_escaped(project, client):
    response = client.post(f"/p/{project.slug}/exports/", {**FORM, "tasks": "<script>x</script>"})
    assert b"<script>x</script>" not in response.content
    assert b"&lt;script&gt;x&lt;/script&gt;" in response.content
