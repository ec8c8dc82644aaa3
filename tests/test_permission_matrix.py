"""Every URL pattern against every role: who may GET it, who may POST to it.

The patterns are enumerated from the resolver, so a new view fails this suite until it gets
a row in `MATRIX`. Expected results: anonymous visitors are sent to the login page (the API
answers 401/403), a member of another project gets 404 (the project's existence stays
hidden), a member whose role is too low gets 403. A denied request changes no row.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import User
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import transaction
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

from annotate.models import Queue, QueueItem
from curation.models import DatasetExport, ImportJob, Membership, Project, Step, Task, Trajectory
from workers.judging import runs
from workers.models import (
    Correction,
    CorrectionBatch,
    CriticModel,
    JudgeBatch,
    JudgeConfig,
    JudgeRun,
    TeacherConfig,
)

ANONYMOUS, OUTSIDER = "anonymous", "outsider"
ANNOTATOR, REVIEWER = Membership.Role.ANNOTATOR.value, Membership.Role.REVIEWER.value
RESEARCHER, ADMIN = Membership.Role.RESEARCHER.value, Membership.Role.ADMIN.value
ROLES = (ANONYMOUS, OUTSIDER, ANNOTATOR, REVIEWER, RESEARCHER, ADMIN)

# Who is allowed. The project roles are not a chain (a reviewer adjudicates, a researcher
# imports), so each rule names its set of roles.
PUBLIC = frozenset(ROLES)
SIGNED_IN = frozenset(ROLES) - {ANONYMOUS}  # pages that only ever show the user's own projects
MEMBERS = frozenset({ANNOTATOR, REVIEWER, RESEARCHER, ADMIN})
REVIEWERS = frozenset({REVIEWER, ADMIN})
MANAGERS = frozenset({RESEARCHER, ADMIN})
NO_METHOD = frozenset()  # the view refuses the method (405) to everyone signed in
UNCHECKED = None  # the method is not part of this URL's contract (e.g. POST to a read-only page)

# URL name -> (GET rule, POST rule).
MATRIX: dict[str, tuple[frozenset[str] | None, frozenset[str] | None]] = {
    "login": (PUBLIC, PUBLIC),
    "logout": (UNCHECKED, PUBLIC),
    "api-schema": (PUBLIC, UNCHECKED),
    "api-token": (UNCHECKED, PUBLIC),
    "project-list": (SIGNED_IN, UNCHECKED),
    "import-runs": (MANAGERS, MANAGERS),
    "import-job": (MEMBERS, UNCHECKED),
    "dataset-exports": (MANAGERS, MANAGERS),
    "dataset-export": (MANAGERS, UNCHECKED),
    "dataset-export-rerun": (NO_METHOD, MANAGERS),
    "dataset-export-file": (MANAGERS, UNCHECKED),
    "project-detail": (MEMBERS, UNCHECKED),
    "trajectory-detail": (MEMBERS, UNCHECKED),
    "annotation-form": (MEMBERS, MEMBERS),
    "queue-list": (MEMBERS, UNCHECKED),
    "queue-create": (MANAGERS, MANAGERS),
    "queue-detail": (MEMBERS, UNCHECKED),
    "queue-next": (MEMBERS, UNCHECKED),
    "adjudication-list": (REVIEWERS, UNCHECKED),
    "adjudication-detail": (REVIEWERS, REVIEWERS),
    "agreement": (MEMBERS, UNCHECKED),
    "project-settings": (MANAGERS, MANAGERS),
    "judge-evaluation": (MEMBERS, UNCHECKED),
    "judge-list": (MEMBERS, UNCHECKED),
    "judge-create": (MANAGERS, MANAGERS),
    "judge-detail": (MEMBERS, UNCHECKED),
    "judge-edit": (MANAGERS, MANAGERS),
    "judge-run": (NO_METHOD, MANAGERS),
    "judge-batch": (MEMBERS, UNCHECKED),
    "judge-run-detail": (MEMBERS, UNCHECKED),
    "correction-list": (MEMBERS, UNCHECKED),
    "correction-start": (MANAGERS, MANAGERS),
    "correction-batch": (MEMBERS, UNCHECKED),
    "correction-detail": (MEMBERS, UNCHECKED),
    "correction-override": (NO_METHOD, REVIEWERS),
    "teacher-create": (MANAGERS, MANAGERS),
    "teacher-edit": (MANAGERS, MANAGERS),
    "critic-list": (MEMBERS, UNCHECKED),
    "critic-train": (NO_METHOD, MANAGERS),
    "critic-detail": (MEMBERS, UNCHECKED),
    "critic-use": (NO_METHOD, MANAGERS),
    "api-project-list": (SIGNED_IN, UNCHECKED),
    "api-project-detail": (MEMBERS, UNCHECKED),
    "api-project-import": (NO_METHOD, MANAGERS),
    "api-import-job-detail": (MEMBERS, UNCHECKED),
    "api-project-exports": (MANAGERS, MANAGERS),
    "api-export-detail": (MANAGERS, UNCHECKED),
    "api-export-file": (MANAGERS, UNCHECKED),
    "api-task-list": (SIGNED_IN, UNCHECKED),
    "api-task-detail": (MEMBERS, UNCHECKED),
    "api-trajectory-list": (SIGNED_IN, UNCHECKED),
    "api-trajectory-detail": (MEMBERS, UNCHECKED),
}

# Which fixture object fills the `<int:pk>` of each URL.
PK_OF = {
    "import-job": "import_job",
    "api-import-job-detail": "import_job",
    "dataset-export": "export",
    "dataset-export-rerun": "export",
    "dataset-export-file": "export",
    "api-export-detail": "export",
    "api-export-file": "export",
    "trajectory-detail": "trajectory",
    "annotation-form": "trajectory",
    "adjudication-detail": "trajectory",
    "api-trajectory-detail": "trajectory",
    "api-task-detail": "task",
    "queue-detail": "queue",
    "queue-next": "queue",
    "judge-batch": "judge_batch",
    "judge-run-detail": "judge_run",
    "correction-batch": "correction_batch",
    "correction-detail": "correction",
    "correction-override": "correction",
}
EXPORT_FILE = "data.jsonl"

# What a POST sends where an empty form would be refused for its content rather than its role.
POST_DATA = {"correction-override": {"decision": "accept"}}


@dataclass(frozen=True)
class Route:
    name: str
    route: str
    params: tuple[str, ...]

    @property
    def is_api(self) -> bool:
        return self.route.startswith("api/")


def _walk(patterns: list, prefix: str = "") -> Iterator[tuple[str, URLPattern]]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            if pattern.namespace == "admin":
                continue  # the Django admin: see test_the_admin_is_for_staff_only
            yield from _walk(pattern.url_patterns, prefix + str(pattern.pattern))
        else:
            yield prefix + str(pattern.pattern), pattern


def enumerate_routes() -> list[Route]:
    routes = []
    for route, pattern in _walk(get_resolver().url_patterns):
        params = tuple(pattern.pattern.converters)
        routes.append(Route(pattern.name or f"<unnamed {route}>", route, params))
    return routes


ROUTES = enumerate_routes()


def make_world() -> dict[str, Any]:
    """One project with one of everything a URL can point at, a user per role, and another
    project whose admin is the outsider."""
    project = Project.objects.create(slug="demo", name="Demo")
    other = Project.objects.create(slug="other", name="Other")
    users: dict[str, User | None] = {ANONYMOUS: None}
    for role in (ANNOTATOR, REVIEWER, RESEARCHER, ADMIN):
        users[role] = User.objects.create_user(role)
        Membership.objects.create(project=project, user=users[role], role=role)
    users[OUTSIDER] = User.objects.create_user(OUTSIDER)
    Membership.objects.create(project=other, user=users[OUTSIDER], role=ADMIN)

    task = Task.objects.create(project=project, external_id="t-1")
    trajectory = Trajectory.objects.create(
        project=project, task=task, source_format="test", content_hash=uuid.uuid4().hex
    )
    Step.objects.create(trajectory=trajectory, index=0, role="user", content="hi")
    trajectory.step_count = 1
    trajectory.save()
    queue = Queue.objects.create(project=project, name="q")
    QueueItem.objects.create(queue=queue, trajectory=trajectory, position=0)

    judge = JudgeConfig.objects.get(project=project, name="heuristic")
    version = runs.current_version(judge)
    judge_batch = JudgeBatch.objects.create(version=version, total=1)
    judge_run = JudgeRun.objects.create(version=version, trajectory=trajectory, batch=judge_batch)
    teacher = TeacherConfig.objects.create(project=project, name="t", backend="openai", model="m")
    correction_batch = CorrectionBatch.objects.create(project=project, teacher=teacher, total=1)
    result = Trajectory.objects.create(
        project=project, task=task, source_format="test", content_hash=uuid.uuid4().hex
    )
    correction = Correction.objects.create(
        batch=correction_batch,
        source=trajectory,
        result=result,
        intervention_step=0,
        teacher_settings={},
        status=Correction.Status.GENERATED,
    )
    critic = CriticModel.objects.create(project=project, version=1, status="done")

    storage = storages["exports"]
    path = storage.save(f"exports/matrix/{EXPORT_FILE}", ContentFile(b"{}\n"))
    export = DatasetExport.objects.create(
        project=project,
        kind=DatasetExport.Kind.SFT,
        filter={},
        filter_key="x",
        version=1,
        status=DatasetExport.Status.DONE,
        files=[{"name": EXPORT_FILE, "path": path, "bytes": 3, "sha256": ""}],
    )
    import_job = ImportJob.objects.create(
        project=project, upload=ContentFile(b"{}", name="x.jsonl"), original_name="x.jsonl"
    )
    return {
        "users": users,
        "project": project,
        "task": task,
        "trajectory": trajectory,
        "queue": queue,
        "judge": judge,
        "judge_batch": judge_batch,
        "judge_run": judge_run,
        "teacher": teacher,
        "correction_batch": correction_batch,
        "correction": correction,
        "critic": critic,
        "export": export,
        "import_job": import_job,
    }


def url_of(route: Route, world: dict[str, Any]) -> str:
    kwargs: dict[str, Any] = {}
    for param in route.params:
        if param == "slug":
            kwargs[param] = world["project"].slug
        elif param == "version":
            kwargs[param] = world["critic"].version
        elif param == "name" and route.name.startswith("judge-"):
            kwargs[param] = world["judge"].name
        elif param == "name" and route.name.startswith("teacher-"):
            kwargs[param] = world["teacher"].name
        elif param == "name":
            kwargs[param] = EXPORT_FILE
        elif param == "pk" and route.name in PK_OF:
            kwargs[param] = world[PK_OF[route.name]].pk
        else:
            pytest.fail(f"URL '{route.name}' ({route.route}): no fixture fills <{param}>")
    return reverse(route.name, kwargs=kwargs)


def row_counts() -> dict[str, int]:
    """Rows per model, sessions aside (logging a test user in writes one)."""
    return {
        model._meta.label: model.objects.count()
        for model in apps.get_models()
        if model._meta.label != "sessions.Session"
    }


def request_as(user: User | None, method: str, url: str, data: dict | None = None) -> Any:
    client = Client()
    if user is not None:
        client.force_login(user)
    with transaction.atomic():  # each request starts from the same world
        response = getattr(client, method)(url, data)
        transaction.set_rollback(True)
    return response


def is_login_redirect(response: Any) -> bool:
    return response.status_code == 302 and response["Location"].startswith(reverse("login"))


def check(route: Route, method: str, rule: frozenset[str], world: dict[str, Any]) -> list[str]:
    """What went other than expected for each role, as readable lines."""
    url = url_of(route, world)
    wrong = []
    for role in ROLES:
        before = row_counts()
        data = POST_DATA.get(route.name) if method == "post" else None
        response = request_as(world["users"][role], method, url, data)
        status = response.status_code
        if rule is NO_METHOD:
            expected, ok = "405", status == 405
            if role == ANONYMOUS:
                expected = "401/403" if route.is_api else "login redirect"
                ok = status in (401, 403) if route.is_api else is_login_redirect(response)
        elif role in rule:
            expected = "allowed"
            ok = status not in (401, 403, 404, 405)
            ok = ok and (rule is PUBLIC or not is_login_redirect(response))
        elif role == ANONYMOUS:
            expected = "401/403" if route.is_api else "login redirect"
            ok = status in (401, 403) if route.is_api else is_login_redirect(response)
        elif role == OUTSIDER:
            expected, ok = "404", status == 404
        else:
            expected, ok = "403", status == 403
        if not ok:
            wrong.append(f"{method.upper()} {url} as {role}: {status}, expected {expected}")
        if expected != "allowed" and row_counts() != before:
            wrong.append(f"{method.upper()} {url} as {role} was refused but changed rows")
    return wrong


@pytest.mark.parametrize("route", ROUTES, ids=[r.name for r in ROUTES])
@pytest.mark.django_db
def test_every_url_answers_each_role_as_decided(route: Route) -> None:
    if route.name not in MATRIX:
        pytest.fail(
            f"URL '{route.name}' ({route.route}) has no permission decision: add it to MATRIX "
            "in tests/test_permission_matrix.py"
        )
    world = make_world()
    wrong = []
    for method, rule in zip(("get", "post"), MATRIX[route.name], strict=True):
        if rule is not UNCHECKED:
            wrong += check(route, method, rule, world)
    assert not wrong, "\n".join(wrong)


def test_the_matrix_names_only_urls_that_exist() -> None:
    stale = set(MATRIX) - {route.name for route in ROUTES}
    assert not stale, f"MATRIX names URLs that no longer exist: {sorted(stale)}"


def test_every_url_has_a_name() -> None:
    unnamed = [route.route for route in ROUTES if route.name.startswith("<unnamed")]
    assert not unnamed, f"name these URL patterns so the matrix can refer to them: {unnamed}"


@pytest.mark.django_db
def test_the_admin_is_for_staff_only() -> None:
    """The Django admin is for staff; no project role, not even a project admin, opens it."""
    world = make_world()
    admin_login = reverse("admin:login")
    urls = [reverse("admin:index")] + [
        reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        for model in apps.get_models()
        if admin.site.is_registered(model)
    ]
    for role in ROLES:
        for url in urls:
            response = request_as(world["users"][role], "get", url)
            assert response.status_code == 302, (url, role, response.status_code)
            assert response["Location"].startswith(admin_login), (url, role)
    staff = User.objects.create_user("staff", is_staff=True, is_superuser=True)
    for url in urls:
        assert request_as(staff, "get", url).status_code == 200, url
