"""The whole loop on the real samples in ../shared/data: import, judge with the heuristic,
correct the failures from their first critical step (a scripted teacher on a local HTTP
server), verify with the heuristic, read the recovery table."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from curation.models import Project, Step
from tests.curation.helpers import run_import
from tests.workers.judge_server import completion, judge_server
from workers.models import Correction, TeacherConfig


def teacher_reply(body: dict) -> tuple[int, object]:
    return completion(
        json.dumps({"content": "Before I act: could you confirm the details?", "tool_calls": []})
    )


def loop(project_slug: str, path: Path) -> dict:
    code, summary = run_import(path, project=project_slug)
    assert code == 0, summary["errors"]
    quiet = io.StringIO()
    call_command("judge", config="heuristic", project=project_slug, here=True, stdout=quiet)
    with judge_server(teacher_reply) as server:
        TeacherConfig.objects.create(
            project=Project.objects.get(slug=project_slug),
            name="teacher",
            backend="openai",
            model="scripted",
            options={"base_url": server.base_url},
        )
        out = io.StringIO()
        call_command(
            "correct",
            project=project_slug,
            teacher="teacher",
            verifier="heuristic",
            filter=["verdict=failure"],
            here=True,
            json=True,
            stdout=out,
        )
    return json.loads(out.getvalue())


def assert_prefixes_kept(project_slug: str) -> None:
    for correction in Correction.objects.filter(batch__project__slug=project_slug).select_related(
        "result"
    ):
        k = correction.intervention_step
        fields = ("index", "role", "name", "content", "reasoning", "tool_calls", "tool_call_id")
        original = list(
            Step.objects.filter(trajectory_id=correction.source_id, index__lt=k)
            .order_by("index")
            .values_list(*fields)
        )
        copied = list(
            Step.objects.filter(trajectory_id=correction.result_id, index__lt=k)
            .order_by("index")
            .values_list(*fields)
        )
        assert copied == original


@pytest.mark.shared_data
@pytest.mark.django_db
def test_who_and_when_failures_are_corrected_from_the_gold_step(shared_data) -> None:
    result = loop("ww", shared_data / "who-and-when" / "algorithm-generated")

    assert result["total"] == 126 and result["skipped"] == 0  # every log has a gold step
    assert result["queued"] == result["running"] == result["failed"] == 0
    assert result["accepted"] + result["rejected"] + result["generated"] == 126
    assert_prefixes_kept("ww")
    out = io.StringIO()
    call_command("correction_report", project="ww", json=True, stdout=out)
    assert json.loads(out.getvalue())["all"][0]["attempted"] == 126


@pytest.mark.shared_data
@pytest.mark.django_db
def test_tau_bench_failures_are_corrected_where_a_step_is_named(shared_data) -> None:
    result = loop("tau", shared_data / "tau-bench" / "gpt-4o-airline.json")

    assert result["total"] + result["skipped"] == 116  # the failed runs (reward 0)
    assert result["total"] > 0 and result["failed"] == 0
    assert_prefixes_kept("tau")
