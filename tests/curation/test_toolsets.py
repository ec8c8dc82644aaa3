"""Tool schemas are stored once per project, however many runs share them."""

from __future__ import annotations

from rest_framework.test import APIClient

from curation.formats.reading import RawItem
from curation.ingest import import_items
from curation.models import Project, ToolSet, Trajectory

TOOLS = [{"type": "function", "function": {"name": "get_user", "parameters": {"type": "object"}}}]
OTHER = [{"type": "function", "function": {"name": "book", "parameters": {}}}]


def run(n: int, tools: list) -> RawItem:
    record = {"id": f"r{n}", "tools": tools, "steps": [{"role": "user", "content": f"hi {n}"}]}
    return RawItem("test", f"item {n}", record)


def test_runs_sharing_tools_share_one_toolset(project: Project) -> None:
    items = [run(0, TOOLS), run(1, TOOLS), run(2, OTHER), run(3, [])]
    summary = import_items(project, items, batch_size=2)  # the shared set spans batches
    assert summary.created == 4
    assert ToolSet.objects.filter(project=project).count() == 2
    by_id = {t.external_id: t for t in Trajectory.objects.select_related("toolset")}
    assert by_id["r0"].toolset_id == by_id["r1"].toolset_id
    assert by_id["r0"].tools == TOOLS and by_id["r2"].tools == OTHER
    assert by_id["r3"].toolset is None and by_id["r3"].tools == []


def test_each_project_keeps_its_own_toolsets_and_deletes_them_with_it(project: Project) -> None:
    other = Project.objects.create(slug="other", name="Other")
    import_items(project, [run(0, TOOLS)])
    import_items(other, [run(0, TOOLS)])
    assert ToolSet.objects.count() == 2
    other.delete()
    assert ToolSet.objects.count() == 1
    assert Trajectory.objects.get().tools == TOOLS


def test_the_api_shows_a_runs_tools(admin_user, project: Project) -> None:
    import_items(project, [run(0, TOOLS)])
    client = APIClient()
    client.force_authenticate(admin_user)
    body = client.get(f"/api/trajectories/{Trajectory.objects.get().pk}/").json()
    assert body["tools"] == TOOLS
