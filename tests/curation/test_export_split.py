"""The train/test split is by task: no task on both sides, the same side every time."""

from __future__ import annotations

import pytest

from curation.exports.split import split_of
from tests.curation.export_helpers import export, load, record, rows

pytestmark = pytest.mark.django_db


def test_no_task_is_on_both_sides(project):
    load(project, [record(n, f"task-{n % 12}", True) for n in range(60)])
    done = export(project, "sft", test_fraction=0.5)
    tasks = {split: set() for split in ("train", "test")}
    for split in tasks:
        assert done.counts[split] > 0
    for row in rows(done):
        tasks[split_of(row["task_id"], 0.5)].add(row["task_id"])
    assert tasks["train"] and tasks["test"]
    assert not tasks["train"] & tasks["test"]
    assert done.counts["train"] + done.counts["test"] == 60
    # each file holds exactly the tasks of its side
    by_file = {f["split"]: f["rows"] for f in done.files if "split" in f}
    assert by_file == {"train": done.counts["train"], "test": done.counts["test"]}


def test_a_task_keeps_its_side_and_the_seed_reshuffles_tasks():
    tasks = [f"task-{n}" for n in range(200)]
    first = [split_of(t, 0.3) for t in tasks]
    assert first == [split_of(t, 0.3) for t in tasks]
    assert 40 < first.count("test") < 80
    assert first != [split_of(t, 0.3, seed="other") for t in tasks]
    assert {split_of(t, 0) for t in tasks} == {"train"}
