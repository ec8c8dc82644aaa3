"""Exports are immutable versions: the same data and filter give byte-identical data files and
the same sha256; a new version says whether its content changed."""

from __future__ import annotations

import pytest

from tests.curation.export_helpers import export, judge, load, record, stored

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("format_name", ["jsonl", "parquet"])
@pytest.mark.parametrize("kind", ["sft", "preference", "unpaired", "stepwise", "rl_prefix"])
def test_the_same_data_and_filter_give_the_same_sha256(project, kind, format_name):
    runs = load(project, [record(n, f"t{n % 5}", n % 3 != 0) for n in range(30)])
    for failure in runs[::3]:
        judge(failure, "failure", 4)
    first = export(project, kind, format_name, test_fraction=0.3)
    second = export(project, kind, format_name, test_fraction=0.3)

    assert first.content_sha256 == second.content_sha256
    assert (first.version, second.version) == (1, 2)
    assert (first.changed, second.changed) == (None, False)
    a, b = stored(first), stored(second)
    assert a.keys() == b.keys()
    for name in a:
        if name != "manifest.json":  # the manifest names its export and time
            assert a[name].read_bytes() == b[name].read_bytes(), name
    assert a["manifest.json"] != b["manifest.json"]


def test_new_data_makes_a_changed_version_and_other_filters_their_own_series(project):
    load(project, [record(n, f"t{n}", True) for n in range(4)])
    first = export(project, "sft")
    load(project, [record(9, "t9", True)])
    second = export(project, "sft")
    other = export(project, "sft", limit=2)
    parquet = export(project, "sft", "parquet")

    assert (second.version, second.changed) == (2, True)
    assert second.content_sha256 != first.content_sha256
    assert (other.version, other.changed) == (1, None)
    assert (parquet.version, parquet.changed) == (1, None)
    assert second.counts["rows"] == 5 and other.counts["rows"] == 2
