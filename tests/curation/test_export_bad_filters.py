"""A filter the export cannot run with gets an error that names it, from the command, the API
and the page alike, and nothing is created: no export row, no file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client
from rest_framework.test import APIClient

from curation.models import DatasetExport
from tests.curation.export_helpers import load, member, record, run_command

pytestmark = pytest.mark.django_db

# (kind, filter, field named in the error, words of the error)
BAD = [
    ("sft", {"verdicts": ["failure"]}, "verdicts", "sft exports use success runs only"),
    ("sft", {"min_steps": 9, "max_steps": 3}, "min_steps", "above max_steps"),
    ("sft", {"tasks": ["no-such-task"]}, "tasks", "no task 'no-such-task'"),
    ("sft", {"tokenizer": "/nowhere/tokenizer"}, "tokenizer", "available locally"),
    ("sft", {"test_fraction": 1.5}, "test_fraction", "fraction"),
    ("unpaired", {"min_source": "expert"}, "min_source", "unknown value 'expert'"),
    ("sft", {"pairs": ["outcome"]}, "pairs", "preference exports only"),
    ("stepwise", {"colour": "red"}, "colour", "unknown filter"),
    ("rl_prefix", {"limit": 0}, "limit", "1 or more"),
    ("sft", {"tasks": ["t1\x00"]}, "tasks", "NUL characters are not allowed"),
    ("sft", {"split_seed": "a\x00"}, "split_seed", "NUL characters are not allowed"),
]
COMMAND_BAD = [  # (kind, options, words of the error)
    ("sft", ["--verdict=failure"], "verdicts: sft exports use success runs only"),
    ("sft", ["--min-steps=9", "--max-steps=3"], "min_steps: min_steps (9) is above max_steps"),
    ("sft", ["--task=no-such-task"], "tasks: no task 'no-such-task' in project demo"),
    ("sft", ["--tokenizer=/nowhere/tok"], "tokenizer: no tokenizer '/nowhere/tok' available"),
    ("sft", ["--test-fraction=1.5"], "test_fraction: expected a fraction"),
    ("unpaired", ["--min-source=expert"], "invalid choice: 'expert'"),
    ("sft", ["--pairs=outcome"], "pairs: applies to preference exports only"),
    ("rl_prefix", ["--limit=0"], "limit: expected a whole number, 1 or more"),
]


@pytest.fixture(autouse=True)
def runs(project):
    load(project, [record(1, "t1", True)])


def nothing_written(out: Path | None = None) -> None:
    assert not DatasetExport.objects.exists()
    assert not (Path(settings.MEDIA_ROOT) / "exports").exists()
    assert out is None or not out.exists()


@pytest.mark.parametrize(("kind", "spec", "field", "words"), BAD)
def test_the_api_answers_400_naming_the_filter(project, kind, spec, field, words):
    client = APIClient()
    client.force_authenticate(member(project, "researcher"))
    response = client.post(
        f"/api/projects/{project.slug}/exports/", {"kind": kind, "filter": spec}, format="json"
    )
    assert response.status_code == 400
    [reason] = response.json()["filter"][field]
    assert words in reason
    nothing_written()


@pytest.mark.parametrize(("kind", "options", "words"), COMMAND_BAD)
def test_the_command_says_what_is_wrong(project, kind, options, words, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(CommandError, match=re.escape(words)):
        call_command("export_dataset", *options, project=project.slug, kind=kind, out=str(out))
    nothing_written(out)


def test_the_command_refuses_an_unknown_project(tmp_path):
    with pytest.raises(CommandError, match="no project 'nope'"):
        run_command(project="nope", kind="sft", out=str(tmp_path / "out"))
    nothing_written(tmp_path / "out")


def test_the_page_shows_the_error_on_the_field(project):
    client = Client()
    client.force_login(member(project, "researcher"))
    response = client.post(
        f"/p/{project.slug}/exports/",
        {"kind": "sft", "format": "jsonl", "verdicts": ["failure"], "test_fraction": "0.1"},
    )
    assert response.status_code == 200
    assert b"sft exports use success runs only" in response.content
    nothing_written()
