"""Exact duplicates (the same training columns) are written once."""

from __future__ import annotations

import pytest

from tests.curation.export_helpers import export, load, record, rows, steps

pytestmark = pytest.mark.django_db


def test_exact_duplicates_are_removed_and_counted(project):
    same = steps(1)
    load(
        project,
        [
            record(1, "t1", True, steps=same),
            record(2, "t2", True, steps=same),  # another run, word for word the same
            record(3, "t3", True),
        ],
    )
    done = export(project, "sft", test_fraction=0)
    assert [r["task_id"] for r in rows(done)] == ["t1", "t3"]  # the first one is kept
    assert done.counts["duplicates"] == 1
    assert done.manifest["counts"]["duplicates"] == 1

    kept = export(project, "sft", test_fraction=0, dedup=False)
    assert [r["task_id"] for r in rows(kept)] == ["t1", "t2", "t3"]
    assert kept.counts["duplicates"] == 0
