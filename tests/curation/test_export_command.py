"""`export_dataset`: a DPO dataset in one command, and the same run kept as a version."""

from __future__ import annotations

import json

import datasets
import pytest

from curation.models import DatasetExport
from tests.curation.export_helpers import correct, judge, load, record, run_command

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs(project):
    runs = load(project, [record(n, f"t{n % 4}", n % 2 == 0) for n in range(8)])
    for failure in runs[1::2]:
        judge(failure, "failure", 4)
        correct(failure, 4, [{"role": "assistant", "content": f"fixed {failure.pk}"}])


def test_one_command_makes_a_dpo_dataset(project, runs, tmp_path):
    out = tmp_path / "dpo"
    said = run_command(project=project.slug, kind="preference", out=str(out))
    assert "Exported 4 preference rows" in said and "version 1, first version" in said
    manifest = json.loads((out / "manifest.json").read_text())
    names = {f["name"] for f in manifest["files"]}
    assert {p.name for p in out.iterdir()} == names | {"manifest.json"}
    assert "README.md" in names and "train.jsonl" in names
    loaded = datasets.load_dataset(
        "json",
        data_files={f["split"]: str(out / f["name"]) for f in manifest["files"] if "split" in f},
        cache_dir=str(tmp_path / "cache"),
    )
    assert sum(d.num_rows for d in loaded.values()) == 4
    assert {"prompt", "chosen", "rejected"} <= set(loaded["train"].column_names)
    export = DatasetExport.objects.get()
    assert (export.kind, export.status, export.created_by) == ("preference", "done", None)

    again = run_command(project=project.slug, kind="preference", out=str(out))
    assert "version 2, content unchanged" in again


def test_json_output_is_the_manifest_and_filters_apply(project, runs, tmp_path):
    said = run_command(
        project=project.slug,
        kind="unpaired",
        out=str(tmp_path / "kto"),
        format="parquet",
        json=True,
        verdicts=["failure"],
        test_fraction=0.0,
        limit=3,
    )
    manifest = json.loads(said)
    assert manifest["counts"]["rows"] == 3
    assert manifest["filter"]["verdicts"] == ["failure"] and manifest["format"] == "parquet"
    assert (tmp_path / "kto" / "train.parquet").exists()
