"""`create_queue` makes a queue from list filters on the command line."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from annotate.models import Queue
from curation.formats.reading import RawItem
from curation.ingest import import_items
from curation.models import Project


def runs(project: Project) -> None:
    import_items(
        project,
        [
            RawItem(
                "t",
                f"item {n}",
                {
                    "id": f"r{n}",
                    "steps": [{"role": "user", "content": f"{n}"}],
                    "outcome": {"success": n % 2 == 0},
                },
            )
            for n in range(6)
        ],
    )


def test_it_makes_a_queue_of_the_filtered_runs_once(project: Project) -> None:
    runs(project)
    out = StringIO()
    call_command(
        "create_queue", project="demo", name="fails", filter=["outcome=failure"], stdout=out
    )
    assert "3 items" in out.getvalue()
    call_command("create_queue", project="demo", name="fails", stdout=out)
    assert "already exists" in out.getvalue()
    assert Queue.objects.get().items.count() == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"filter": ["outcome=maybe"]}, "bad filter: outcome"),
        ({"filter": ["outcome"]}, "expected KEY=VALUE"),
        ({"annotator": ["nobody"]}, "no such user: nobody"),
        ({"project": "missing"}, "no project 'missing'"),
    ],
)
def test_it_says_what_is_wrong_and_makes_nothing(project: Project, options, message) -> None:
    runs(project)
    with pytest.raises(CommandError, match=message):
        call_command("create_queue", **{"project": "demo", "name": "q", **options})
    assert not Queue.objects.exists()
