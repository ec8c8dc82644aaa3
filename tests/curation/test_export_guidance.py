"""Correction guidance (and any free-form metadata) never reaches an exported file, and
rejected corrections are never exported."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from curation.models import Trajectory
from tests.curation.export_helpers import GUIDANCE, correct, export, judge, load, record, stored

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("kind", ["sft", "preference", "unpaired", "stepwise", "rl_prefix"])
@pytest.mark.parametrize("format_name", ["jsonl", "parquet"])
def test_guidance_bytes_appear_in_no_file(project, kind, format_name):
    success, failure = load(
        project,
        [
            record(1, "t1", True, metadata={"guidance": GUIDANCE}),
            record(2, "t1", False, metadata={"note": GUIDANCE}),
        ],
    )
    judge(failure, "failure", 4)
    correct(failure, 4, [{"role": "assistant", "content": "fixed"}])
    rejected = correct(failure, 2, [{"role": "assistant", "content": "REJECTED-TEXT"}], False)
    assert GUIDANCE in str(Trajectory.objects.get(pk=rejected.pk).metadata)

    done = export(project, kind, format_name, test_fraction=0)
    assert done.counts["rows"] > 0
    needles = [GUIDANCE.encode(), GUIDANCE.encode("utf-16-le"), b"REJECTED-TEXT"]
    for name, path in stored(done).items():
        body = path.read_bytes()
        if path.suffix == ".parquet":  # compressed pages hide bytes: search the decoded rows too
            body += json.dumps(pq.read_table(path).to_pylist()).encode()
        for needle in needles:
            assert needle not in body, f"{needle!r} in {name}"
