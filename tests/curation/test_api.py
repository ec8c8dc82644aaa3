"""The REST API: listing, filtering, paging, detail with steps, bulk import, permissions."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from curation.models import ImportJob, Membership, Project, Trajectory


def record(n: int, success: bool = True, model: str = "gpt-4o") -> dict:
    return {
        "id": f"run-{n}",
        "task": {"id": f"task-{n % 3}", "instruction": f"Do thing {n % 3}"},
        "agent": {"model": model, "role": "teacher"},
        "steps": [
            {"role": "user", "content": f"please do {n}"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"id": "c1", "name": "lookup", "arguments": {"n": n}}],
            },
            {"role": "tool", "tool_call_id": "c1", "name": "lookup", "content": "{}"},
            {"role": "assistant", "content": "done"},
        ],
        "outcome": {"success": success, "reward": 1.0 if success else 0.0},
    }


def ndjson(records: list[dict | str]) -> bytes:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records).encode()


def client_for(user: User) -> APIClient:
    client = APIClient()
    token = Token.objects.create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def researcher(project: Project) -> User:
    user = User.objects.create_user("rita", password="pw")
    Membership.objects.create(project=project, user=user, role=Membership.Role.RESEARCHER)
    return user


@pytest.fixture
def api(researcher: User) -> APIClient:
    return client_for(researcher)


def import_via_api(api: APIClient, slug: str, body: bytes, **params: str):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return api.post(
        f"/api/projects/{slug}/import/?{query}", data=body, content_type="application/x-ndjson"
    )


def test_it_imports_ndjson_and_answers_with_the_summary(api: APIClient, project: Project) -> None:
    response = import_via_api(api, project.slug, ndjson([record(1), record(2, success=False)]))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["created"] == 2
    assert body["steps"] == 8
    assert body["failed"] == 0 and body["errors"] == []
    assert Trajectory.objects.filter(project=project).count() == 2

    again = import_via_api(api, project.slug, ndjson([record(1), record(2, success=False)]))
    assert again.json()["created"] == 0
    assert again.json()["duplicates"] == 2


def test_it_reports_bad_lines_with_422_and_keeps_the_good_ones(
    api: APIClient, project: Project
) -> None:
    bad = record(3)
    bad["steps"][1]["role"] = "robot"
    response = import_via_api(api, project.slug, ndjson([record(1), "{not json", bad, record(2)]))
    assert response.status_code == 422
    body = response.json()
    assert body["created"] == 2
    assert body["failed"] == 2
    locations = {e["location"]: e["error"] for e in body["errors"]}
    assert "invalid JSON" in locations["line 2"]
    assert "steps[1].role" in locations["line 3"]
    assert Trajectory.objects.filter(project=project).count() == 2


def test_the_api_and_the_command_give_the_same_summary(
    api: APIClient, project: Project, tmp_path: Path
) -> None:
    bad = record(9)
    bad["steps"] = "not a list"
    lines = [record(1), record(2), "[1, 2", bad, record(1)]
    path = tmp_path / "runs.jsonl"
    path.write_bytes(ndjson(lines))
    other = Project.objects.create(slug="other", name="Other")
    out = StringIO()
    with pytest.raises(SystemExit) as exited:
        call_command(
            "import_trajectories", str(path), "--project", other.slug, "--json", stdout=out
        )
    assert exited.value.code == 1
    from_command = json.loads(out.getvalue())

    from_api = import_via_api(api, project.slug, ndjson(lines)).json()
    for summary in (from_command, from_api):
        summary.pop("project")
        for error in summary["errors"]:
            error.pop("source")
    assert from_api == from_command
    assert from_api["created"] == 2 and from_api["duplicates"] == 1 and from_api["failed"] == 2


def test_it_imports_a_named_format_from_a_multipart_upload(
    api: APIClient, project: Project
) -> None:
    chat = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("chat.jsonl", ndjson([chat]), content_type="application/jsonl")
    response = api.post(
        f"/api/projects/{project.slug}/import/?format=openai&agent_model=m1&agent_role=student",
        {"file": upload},
        format="multipart",
    )
    assert response.status_code == 200, response.content
    trajectory = Trajectory.objects.get(project=project)
    assert (trajectory.source_format, trajectory.agent_model) == ("openai", "m1")


def test_it_refuses_an_unknown_format(api: APIClient, project: Project) -> None:
    response = import_via_api(api, project.slug, ndjson([record(1)]), format="csv")
    assert response.status_code == 400
    assert "format" in response.json()


def test_it_lists_filters_and_pages_trajectories(api: APIClient, project: Project) -> None:
    records = [record(n, success=n % 2 == 0, model="a" if n < 4 else "b") for n in range(7)]
    import_via_api(api, project.slug, ndjson(records))

    first = api.get(f"/api/trajectories/?project={project.slug}&page_size=3").json()
    assert len(first["results"]) == 3
    second = api.get(first["next"]).json()
    third = api.get(second["next"]).json()
    seen = [t["external_id"] for t in first["results"] + second["results"] + third["results"]]
    assert seen == [f"run-{n}" for n in range(7)]
    assert third["next"] is None

    successes = api.get(f"/api/trajectories/?project={project.slug}&success=true").json()
    assert {t["external_id"] for t in successes["results"]} == {"run-0", "run-2", "run-4", "run-6"}
    model_b = api.get(f"/api/trajectories/?project={project.slug}&agent_model=b").json()
    assert len(model_b["results"]) == 3
    by_task = api.get(f"/api/trajectories/?project={project.slug}&task=task-1").json()
    assert {t["external_id"] for t in by_task["results"]} == {"run-1", "run-4"}
    assert api.get("/api/trajectories/?success=maybe").status_code == 400


def test_it_shows_a_trajectory_with_its_steps_in_order(api: APIClient, project: Project) -> None:
    import_via_api(api, project.slug, ndjson([record(5)]))
    trajectory = Trajectory.objects.get(project=project)
    body = api.get(f"/api/trajectories/{trajectory.pk}/").json()
    assert [s["index"] for s in body["steps"]] == [0, 1, 2, 3]
    assert body["steps"][1]["tool_calls"] == [{"id": "c1", "name": "lookup", "arguments": {"n": 5}}]
    assert body["task"] == "task-2"

    tasks = api.get(f"/api/tasks/?project={project.slug}").json()["results"]
    assert tasks[0]["instruction"] == "Do thing 2"
    assert api.get(f"/api/tasks/{tasks[0]['id']}/").status_code == 200
    assert api.get(f"/api/projects/{project.slug}/").json()["slug"] == project.slug


@pytest.mark.parametrize("role", ["outsider", "anonymous"])
def test_a_user_without_access_gets_403_or_404_from_every_endpoint(
    api: APIClient, project: Project, role: str
) -> None:
    import_via_api(api, project.slug, ndjson([record(1)]))
    trajectory = Trajectory.objects.get(project=project)
    task = trajectory.task
    if role == "anonymous":
        client = APIClient()
    else:
        client = client_for(User.objects.create_user("otto", password="pw"))
    job = ImportJob.objects.create(project=project, upload=ContentFile(b"{}", name="x.jsonl"))
    reads = [
        f"/api/import-jobs/{job.pk}/",
        f"/api/projects/{project.slug}/",
        f"/api/tasks/?project={project.slug}",
        f"/api/tasks/{task.pk}/",
        f"/api/trajectories/?project={project.slug}",
        f"/api/trajectories/{trajectory.pk}/",
    ]
    for url in reads:
        assert client.get(url).status_code in (401, 403, 404), url
    response = import_via_api(client, project.slug, ndjson([record(2)]))
    assert response.status_code in (401, 403, 404)
    if role == "outsider":
        assert client.get("/api/projects/").json()["results"] == []
        assert client.get("/api/trajectories/").json()["results"] == []
    assert Trajectory.objects.count() == 1


def test_an_annotator_can_read_but_not_import(project: Project) -> None:
    user = User.objects.create_user("ann", password="pw")
    Membership.objects.create(project=project, user=user, role=Membership.Role.ANNOTATOR)
    client = client_for(user)
    assert client.get(f"/api/projects/{project.slug}/").status_code == 200
    response = import_via_api(client, project.slug, ndjson([record(1)]))
    assert response.status_code == 403
    assert "researcher" in response.json()["detail"]


def test_it_hands_out_tokens_and_serves_the_openapi_schema(researcher: User) -> None:
    client = APIClient()
    token = client.post("/api/token/", {"username": "rita", "password": "pw"}).json()["token"]
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/projects/").status_code == 200
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    assert "/api/projects/{slug}/import/" in schema.json()["paths"]


def test_a_token_with_a_nul_character_is_unknown(project: Project) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token abc\x00def")
    response = client.get("/api/projects/")
    assert response.status_code == 401
    assert response.json()["detail"] == "Invalid token."
