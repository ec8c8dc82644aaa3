"""The export API: start one (202 and its URL), follow it, list versions, fetch its files."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from curation.exports.runner import run_export
from curation.models import DatasetExport
from tests.curation.export_helpers import correct, judge, load, member, record, stored

pytestmark = pytest.mark.django_db


@pytest.fixture
def client(project) -> APIClient:
    success, failure = load(project, [record(1, "t1", True), record(2, "t1", False)])
    judge(failure, "failure", 4)
    correct(failure, 4, [{"role": "assistant", "content": "fixed"}])
    client = APIClient()
    client.force_authenticate(member(project, "researcher"))
    return client


def test_start_follow_and_download_an_export(project, client):
    response = client.post(
        f"/api/projects/{project.slug}/exports/",
        {"kind": "preference", "format": "parquet", "filter": {"test_fraction": 0}},
        format="json",
    )
    assert response.status_code == 202, response.content
    started = response.json()
    assert started["status"] == "queued" and started["version"] == 1
    assert (
        response["Location"] == started["url"] == f"http://testserver/api/exports/{started['id']}/"
    )
    assert started["filter"]["test_fraction"] == 0

    run_export(started["id"])
    status = client.get(started["url"]).json()
    assert status["status"] == "done" and status["progress"] == 1.0
    assert status["counts"]["rows"] == 1
    assert status["manifest"]["kind"] == "preference"
    files = {f["name"]: f for f in status["files"]}
    assert set(files) == {"train.parquet", "README.md", "manifest.json"}
    assert "path" not in files["train.parquet"]  # storage paths stay inside

    download = client.get(files["train.parquet"]["url"])
    assert download.status_code == 200
    body = b"".join(download.streaming_content)
    assert body == stored(DatasetExport.objects.get())["train.parquet"].read_bytes()
    assert body[:4] == b"PAR1"

    listing = client.get(f"/api/projects/{project.slug}/exports/").json()
    assert [e["id"] for e in listing["results"]] == [started["id"]]


def test_a_queued_export_reports_queued_and_has_no_files(project, client):
    response = client.post(f"/api/projects/{project.slug}/exports/", {"kind": "sft"}, format="json")
    export = response.json()
    assert client.get(export["url"]).json()["files"] == []
    assert client.get(f"/api/exports/{export['id']}/files/train.jsonl").status_code == 404


def test_unknown_kind_and_format_are_refused(project, client):
    url = f"/api/projects/{project.slug}/exports/"
    assert client.post(url, {"kind": "pretraining"}, format="json").status_code == 400
    bad_format = client.post(url, {"kind": "sft", "format": "csv"}, format="json")
    assert bad_format.status_code == 400 and "format" in bad_format.json()
    assert not DatasetExport.objects.exists()
