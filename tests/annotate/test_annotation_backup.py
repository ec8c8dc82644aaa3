"""export_annotations / import_annotations: every label of a project survives the round trip
into another project holding the same trajectories; a second import adds nothing; what cannot
be imported is reported by line."""

from __future__ import annotations

import gzip
import json
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.utils import timezone

from annotate.history import ADJUDICATION_FIELDS, ANNOTATION_FIELDS
from annotate.models import Adjudication, Annotation, EffectiveLabel, StepScore
from curation.formats.reading import RawItem
from curation.ingest import import_items
from curation.models import Project, Trajectory

RUNS = [
    {
        "id": f"run-{n}",
        "task_id": f"task-{n % 2}",
        "steps": [{"role": "user", "content": f"do {n}"}, {"role": "assistant", "content": "ok"}]
        * 3,
        "outcome": {"success": n == 0},
        **(
            {"labels": [{"verdict": "failure", "first_critical_step": 1, "annotator": "gold"}]}
            if n == 1
            else {}
        ),
    }
    for n in range(4)
]


def with_runs(slug: str) -> Project:
    project = Project.objects.create(slug=slug, name=slug)
    import_items(project, [RawItem("runs", f"line {n}", run) for n, run in enumerate(RUNS)])
    return project


def run(project: Project, n: int) -> Trajectory:
    return Trajectory.objects.get(project=project, external_id=f"run-{n}")


@pytest.fixture
def source(db) -> Project:
    """Labels of every kind on runs 0-2; run 3 has none."""
    project = with_runs("source")
    alice, bob, rev = (User.objects.create_user(name) for name in ("alice", "bob", "rev"))
    first, second, third = run(project, 0), run(project, 1), run(project, 2)
    Annotation.objects.create(
        trajectory=second,
        source="human",
        author=alice,
        verdict="failure",
        first_critical_step=3,
        root_cause_step=1,
        responsible_agent="planner",
        error_category="wrong_tool",
        rationale="Picks <the> wrong tool — ünïcode.",
        confidence=0.75,
        extra={"difficulty": 4, "safe": False},
        step_labels={"0": "progress", "3": "regression"},
        status="submitted",
        version=3,
    )
    Annotation.objects.create(
        trajectory=second, source="human", author=bob, rationale="half done", status="draft"
    )
    Annotation.objects.create(
        trajectory=first, source="judge", source_name="judge-a", verdict="success", confidence=0.9
    )
    Annotation.objects.create(
        trajectory=third, source="heuristic", source_name="loops", verdict="failure"
    )
    Adjudication.objects.create(
        trajectory=second, reviewer=rev, verdict="failure", first_critical_step=2, rationale="x"
    )
    StepScore.objects.bulk_create(
        [
            StepScore(trajectory=first, step_index=0, source="reward_model", score=0.125),
            StepScore(trajectory=first, step_index=0, source="reward_model", score=0.125),
            StepScore(
                trajectory=third, step_index=4, source="judge", source_name="j", label="error"
            ),
        ]
    )
    Annotation.objects.filter(author=alice).update(
        created_at=timezone.now() - timedelta(days=3), updated_at=timezone.now() - timedelta(days=2)
    )
    from annotate.effective import refresh

    refresh(Trajectory.objects.filter(project=project).values_list("pk", flat=True))
    return project


def labels_of(project: Project) -> dict[str, Any]:
    """Every label of the project by trajectory content hash, in comparable form."""
    out: dict[str, Any] = {}
    for trajectory in Trajectory.objects.filter(project=project):
        annotations = sorted(
            (
                a.source,
                a.source_name,
                a.author.username if a.author else None,
                a.version,
                *(json.dumps(getattr(a, f), sort_keys=True) for f in ANNOTATION_FIELDS),
            )
            for a in trajectory.annotations.select_related("author")
        )
        adjudication = Adjudication.objects.filter(trajectory=trajectory).first()
        out[trajectory.content_hash] = {
            "annotations": annotations,
            "adjudication": (
                (adjudication.reviewer.username, adjudication.created_at, adjudication.updated_at)
                + tuple(getattr(adjudication, f) for f in ADJUDICATION_FIELDS)
                if adjudication
                else None
            ),
            "step_scores": sorted(
                trajectory.step_scores.values_list(
                    "step_index", "source", "source_name", "label", "score", "created_at"
                )
            ),
            "effective": {
                k: v
                for k, v in EffectiveLabel.objects.filter(trajectory=trajectory)
                .values()
                .get()
                .items()
                if k != "trajectory_id"
            },
        }
    return out


def export(project: Project, path: Path) -> str:
    out = StringIO()
    call_command("export_annotations", project=project.slug, out=str(path), stdout=out)
    return out.getvalue()


def restore(project: Project, path: Path) -> tuple[str, str, int]:
    """(stdout, stderr, exit status) of import_annotations."""
    out, err = StringIO(), StringIO()
    try:
        call_command("import_annotations", str(path), project=project.slug, stdout=out, stderr=err)
    except SystemExit as exit_:
        return out.getvalue(), err.getvalue(), int(exit_.code or 0)
    return out.getvalue(), err.getvalue(), 0


def lines(path: Path) -> list[dict]:
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as file:
        return [json.loads(line) for line in file]


def write(path: Path, entries: list[dict]) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in entries))


@pytest.mark.parametrize("name", ["labels.jsonl", "labels.jsonl.gz"])
def test_every_label_survives_the_round_trip_and_a_second_import_adds_nothing(
    source, tmp_path, name
):
    path = tmp_path / name
    message = export(source, path)
    assert "Exported 5 annotations, 1 adjudications and 3 step scores of 3 trajectories" in message
    assert len(lines(path)) == 4  # the header, runs 0-2
    copy = with_runs("copy")

    out, err, status = restore(copy, path)
    assert (err, status) == ("", 0)
    assert "Imported 4 annotations, 1 adjudications, 3 step scores into 'copy'" in out
    assert "1 labels already present" in out  # the gold label came with the runs
    assert labels_of(copy) == labels_of(source)
    copied = Annotation.objects.get(trajectory__project=copy, author__username="alice")
    original = Annotation.objects.get(trajectory__project=source, author__username="alice")
    assert (copied.created_at, copied.updated_at) == (original.created_at, original.updated_at)

    counts = (Annotation.objects.count(), Adjudication.objects.count(), StepScore.objects.count())
    out, err, status = restore(copy, path)
    assert (err, status) == ("", 0)
    assert "Imported 0 annotations, 0 adjudications, 0 step scores" in out
    assert "9 labels already present" in out
    assert counts == (
        Annotation.objects.count(),
        Adjudication.objects.count(),
        StepScore.objects.count(),
    )
    assert labels_of(copy) == labels_of(source)


def test_unknown_users_come_back_inactive_and_are_named(source, tmp_path):
    path = tmp_path / "labels.jsonl"
    export(source, path)
    entries = lines(path)
    for entry in entries[1:]:
        for annotation in entry["annotations"]:
            if annotation["author"] == "bob":
                annotation["author"] = "zoe"
    write(path, entries)
    out, _, status = restore(with_runs("copy"), path)
    assert status == 0
    assert "Created 1 inactive users without a password or project role: zoe." in out
    zoe = User.objects.get(username="zoe")
    assert not zoe.is_active and not zoe.has_usable_password()
    assert Annotation.objects.get(author=zoe).rationale == "half done"


def test_what_cannot_be_imported_is_reported_by_line_and_the_rest_is_kept(source, tmp_path):
    path = tmp_path / "labels.jsonl"
    export(source, path)
    header, *entries = lines(path)
    unmatched = {**entries[0], "trajectory": {"external_id": "gone", "content_hash": "nope"}}
    bad_value = json.loads(json.dumps(entries[1]))
    bad_value["annotations"][-1]["status"] = "maybe"
    write(path, [header, entries[0], unmatched, bad_value, entries[2]])
    with open(path, "a") as file:
        file.write("{not json\n")
    copy = with_runs("copy")

    out, err, status = restore(copy, path)
    assert status == 1
    assert err.splitlines() == [
        "line 3: no trajectory of 'copy' has content hash 'nope' and none has external id 'gone'",
        "line 4: status: Value 'maybe' is not a valid choice.",
        "line 6: not JSON (Expecting property name enclosed in double quotes)",
    ]
    assert "3 problems" in out
    assert not Annotation.objects.filter(trajectory=run(copy, 1), source="human").exists()
    assert Annotation.objects.filter(trajectory__project=copy, source="heuristic").exists()


def test_a_label_that_differs_here_is_kept_and_reported(source, tmp_path):
    path = tmp_path / "labels.jsonl"
    export(source, path)
    copy = with_runs("copy")
    restore(copy, path)
    Annotation.objects.filter(trajectory__project=copy, author__username="alice").update(
        rationale="changed here"
    )
    out, err, status = restore(copy, path)
    assert status == 1
    assert err == (
        "line 3: the annotation of alice differs from the one here; kept this instance's\n"
    )
    kept = Annotation.objects.get(trajectory__project=copy, author__username="alice")
    assert kept.rationale == "changed here"


def test_a_trajectory_whose_content_changed_is_matched_by_its_external_id(source, tmp_path):
    path = tmp_path / "labels.jsonl"
    export(source, path)
    copy = with_runs("copy")
    Trajectory.objects.filter(project=copy, external_id="run-2").update(content_hash="other")
    out, _, status = restore(copy, path)
    assert status == 0
    assert "1 trajectories matched by external id only" in out
    assert Annotation.objects.filter(trajectory=run(copy, 2), source="heuristic").exists()


def test_effective_labels_follow_the_imported_labels(source, tmp_path):
    path = tmp_path / "labels.jsonl"
    export(source, path)
    copy = with_runs("copy")
    assert EffectiveLabel.objects.get(trajectory=run(copy, 1)).verdict_source == "human"
    restore(copy, path)
    label = EffectiveLabel.objects.get(trajectory=run(copy, 1))
    assert (label.verdict_source, label.first_critical_step) == ("adjudicated", 2)


@pytest.mark.parametrize(
    ("first_line", "message"),
    [
        ("{}", "not a label export of this app"),
        ('{"format": "trajectory-curation-labels", "version": 9}', "version 9 is unknown"),
    ],
)
def test_a_file_that_is_not_an_export_is_refused(source, tmp_path, first_line, message):
    path = tmp_path / "labels.jsonl"
    path.write_text(first_line + "\n")
    with pytest.raises(CommandError, match=message):
        restore(source, path)


def test_missing_project_or_file_is_refused(source, tmp_path):
    with pytest.raises(CommandError, match="no project 'nope'"):
        call_command("export_annotations", project="nope", out=str(tmp_path / "x.jsonl"))
    with pytest.raises(CommandError, match="no such file"):
        restore(source, tmp_path / "missing.jsonl")


def test_a_user_made_for_a_line_that_failed_is_not_kept(source, tmp_path):
    path = tmp_path / "labels.jsonl"
    export(source, path)
    header, *entries = lines(path)
    failing = json.loads(json.dumps(entries[1]))
    for entry in (failing, entries[1]):
        entry["annotations"][-1]["author"] = "zoe"  # bob's draft
    failing["adjudication"]["verdict"] = "meh"  # read after the annotations
    write(path, [header, failing, entries[1]])
    out, err, status = restore(with_runs("copy"), path)
    assert (status, err) == (1, "line 2: verdict: Value 'meh' is not a valid choice.\n")
    assert "Created 1 inactive users without a password or project role: zoe." in out
    assert Annotation.objects.get(author__username="zoe").rationale == "half done"
