"""API fuzzing: schemathesis generates requests from the project's own OpenAPI schema and sends
them in-process through Django's whole handler (middleware, auth, throttles, views), as a
researcher of a project with data, as an annotator of it and as an anonymous client. No answer
may be a server error, and each must have a documented status code, content type and shape:
the schema is the API's contract, so where the two disagree one of them is wrong.

The runs are bounded (examples per operation) and derandomized, so CI sends the same requests
every time. Besides what the schema describes, part of the requests aim at what exists (path
parameters of real objects, a login that works, import bodies of canonical records broken in
one place, export filters of known names), carry query values no schema can describe (cursors
that decode, NUL characters), or are invalid on purpose (negative mode), so they get past 404
and 400 into the views' own work. Requests that once went wrong are sent on every run (FOUND).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlencode

import pytest
import schemathesis
from django.contrib.auth.models import User
from django.test.client import ClientHandler
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.authtoken.models import Token
from schemathesis import APIOperation, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from curation.exports.runner import check_request, create_export, run_export
from curation.exports.spec import FORMATS as EXPORT_FORMATS
from curation.exports.spec import KINDS, PARSERS
from curation.models import DatasetExport, ImportJob, Project, Task, Trajectory
from tests.curation.export_helpers import load, member, record

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]
EXAMPLES_PER_OPERATION = 25
PASSWORD = "pw"  # member()'s

# The import streams its body whatever its type: send it as the bytes generated.
schemathesis.serializer.alias("application/x-ndjson", "application/octet-stream")


def cursor(tokens: str) -> str:
    """A page cursor as DRF encodes one: base64 of `o=<offset>&r=<reverse>&p=<position>`."""
    return base64.b64encode(tokens.encode()).decode()


# Requests this test found answered outside the schema, some only in runs longer than CI's,
# sent on every run. Each answered 500: NUL characters (PostgreSQL refuses them in text and
# JSON) in query filters, in a stored query parameter or in an export filter, and cursors
# that decode to a position that is no id. Except the last: a body without a Content-Type
# (a raw multipart one is sent without), 415, then undocumented.
DEMO = {"slug": "demo"}  # the `project` fixture's
FOUND: dict[str, list[dict[str, Any]]] = {
    "GET /api/projects/": [{"query": {"cursor": cursor("p=abc")}}],
    "GET /api/tasks/": [
        {"query": {"project": "demo\x00"}},
        {"query": {"external_id": "t1\x00"}},
        {"query": {"cursor": cursor("o=1&p=\x00")}},
    ],
    "GET /api/trajectories/": [
        {"query": {"task": "t1\x00"}},
        {"query": {"agent_model": "\x00"}},
        {"query": {"agent_role": "student\x00"}},
        {"query": {"cursor": cursor("r=1&p=abc")}},
    ],
    "GET /api/projects/{slug}/exports/": [
        {"path_parameters": DEMO, "query": {"cursor": cursor("p=abc")}}
    ],
    "POST /api/projects/{slug}/import/": [
        {"path_parameters": DEMO, "query": {"async": "true", "agent_model": "a\x00"}, "body": b"{}"}
    ],
    "POST /api/projects/{slug}/exports/": [
        {
            "path_parameters": DEMO,
            "body": {"kind": "sft", "filter": {"tasks": ["t1\x00"]}},
            "media_type": "application/json",
        },
        {
            "path_parameters": DEMO,
            "body": {"kind": "sft", "filter": {"split_seed": "\x00"}},
            "media_type": "application/json",
        },
    ],
    "POST /api/token/": [{"body": "username", "media_type": "multipart/form-data"}],
}


def served_schema() -> dict[str, Any]:
    """The schema /api/schema/ serves, as JSON."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return json.loads(OpenApiJsonRenderer().render(schema))


SCHEMA = schemathesis.openapi.from_dict(served_schema())
OPERATIONS = [result.ok() for result in SCHEMA.get_all_operations()]


class InTestTransaction:
    """Django's handler as a WSGI app, run the way Django's test client runs it: without the
    end-of-request hook that would close the test's connection (and its transaction), so the
    requests see the fixtures' rows and everything rolls back after the test."""

    def __init__(self) -> None:
        self.handler = ClientHandler(enforce_csrf_checks=True)

    def __call__(self, environ: dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        response = self.handler(environ)
        cookies = [("Set-Cookie", morsel.OutputString()) for morsel in response.cookies.values()]
        start_response(
            f"{response.status_code} {response.reason_phrase}", [*response.items(), *cookies]
        )
        return [b"".join(response)]  # read whole, so the handler's own close is the only one


JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
# Places in a canonical record (with one label) where the importer meets what it is given.
RECORD_PLACES: list[tuple[str | int, ...]] = [
    ("id",),
    ("task",),
    ("task", "id"),
    ("task", "instruction"),
    ("task", "reference"),
    ("task", "metadata"),
    ("agent",),
    ("agent", "model"),
    ("agent", "role"),
    ("tools",),
    ("tools", 0, "function"),
    ("steps",),
    ("steps", 0),
    ("steps", 1, "role"),
    ("steps", 1, "content"),
    ("steps", 2, "tool_calls"),
    ("steps", 2, "tool_calls", 0, "arguments"),
    ("steps", 3, "tool_call_id"),
    ("outcome",),
    ("outcome", "success"),
    ("outcome", "reward"),
    ("outcome", "info"),
    ("labels",),
    ("labels", 0, "verdict"),
    ("labels", 0, "first_critical_step"),
    ("labels", 0, "confidence"),
    ("metadata",),
]


def with_replaced(place: tuple[str | int, ...], value: Any, n: int) -> dict[str, Any]:
    """Canonical record `n` with the value at `place` replaced."""
    data = record(n, f"task-{n}", False)
    data["labels"] = [{"verdict": "failure", "first_critical_step": 2, "confidence": 0.5}]
    *parents, last = place
    container: Any = data
    for key in parents:
        container = container[key]
    container[last] = value
    return data


def import_bodies() -> st.SearchStrategy[bytes]:
    """JSON Lines of records broken in one place each."""
    broken = st.builds(
        with_replaced, st.sampled_from(RECORD_PLACES), JSON_VALUES, st.integers(100, 120)
    )
    return st.lists(broken, min_size=1, max_size=3).map(
        lambda records: "\n".join(json.dumps(r) for r in records).encode()
    )


@pytest.fixture(autouse=True)
def fast_and_unthrottled(settings) -> None:
    """Hundreds of requests a minute (throttling has its own tests, in test_throttling.py),
    and logins checked in microseconds: a fuzzed login runs the password hasher, even for an
    unknown username."""
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"anon": "100000/minute", "user": "100000/minute"},
    }
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def researcher(project: Project) -> User:
    return member(project, "researcher")


@pytest.fixture
def existing(project: Project) -> dict[str, list[dict[str, Any]]]:
    """Path parameters of what exists, by path template: a project with runs, an import job
    and a finished export (made from the command line: no user)."""
    load(project, [record(1, "t1", True), record(2, "t1", False), record(3, "t2", None)])
    export = create_export(project, check_request(project, "sft", "jsonl", {}), "jsonl", None)
    export = run_export(export.pk)
    assert export.status == DatasetExport.Status.DONE, export.error
    job = ImportJob.objects.create(project=project, original_name="runs.jsonl")
    slug = [{"slug": project.slug}]
    return {
        "/api/projects/{slug}/": slug,
        "/api/projects/{slug}/exports/": slug,
        "/api/projects/{slug}/import/": slug,
        "/api/exports/{id}/": [{"id": export.pk}],
        "/api/exports/{id}/files/{name}": [
            {"id": export.pk, "name": f["name"]} for f in export.files
        ],
        "/api/import-jobs/{id}/": [{"id": job.pk}],
        "/api/tasks/{id}/": [{"id": pk} for pk in Task.objects.values_list("pk", flat=True)],
        "/api/trajectories/{id}/": [
            {"id": pk} for pk in Trajectory.objects.values_list("pk", flat=True)
        ],
    }


@pytest.fixture
def meaningful_bodies(researcher: User) -> dict[str, st.SearchStrategy[dict[str, Any]]]:
    """Bodies the schema alone would hardly generate, by operation: a login that works,
    records the importer parses (arbitrary bytes rarely do) but with odd parts, and export
    filters of known names (the schema says only "an object") with arbitrary values."""
    return {
        "POST /api/token/": st.just(
            {
                "body": {"username": researcher.username, "password": PASSWORD},
                "media_type": "application/json",
            }
        ),
        "POST /api/projects/{slug}/import/": import_bodies().map(lambda body: {"body": body}),
        "POST /api/projects/{slug}/exports/": st.fixed_dictionaries(
            {
                "kind": st.sampled_from(KINDS),
                "format": st.sampled_from(EXPORT_FORMATS),
                "filter": st.dictionaries(
                    st.sampled_from(sorted(PARSERS)), JSON_VALUES, max_size=3
                ),
            }
        ).map(lambda body: {"body": body, "media_type": "application/json"}),
    }


@pytest.fixture(params=["researcher", "annotator", "anonymous"])
def headers(request: pytest.FixtureRequest, project: Project, researcher: User) -> dict[str, str]:
    """Who asks: a researcher (may do everything), an annotator (may read, but importing and
    exporting answer 403) or nobody (401)."""
    if request.param == "anonymous":
        return {}
    user = researcher if request.param == "researcher" else member(project, request.param)
    return {"Authorization": f"Token {Token.objects.create(user=user).key}"}


def decodable_cursors() -> st.SearchStrategy[str]:
    """Page cursors holding any values (random text is almost never a cursor)."""
    tokens = st.dictionaries(st.sampled_from(["o", "r", "p"]), st.text(max_size=6), min_size=1)
    return tokens.map(lambda found: cursor(urlencode(found)))


def odd_queries(operation: APIOperation) -> st.SearchStrategy[dict[str, str]] | None:
    """Query values the schema cannot describe to a generator: cursors that decode, to any
    position, and text with a NUL character, which PostgreSQL refuses in any lookup."""
    names = [parameter.name for parameter in operation.query]
    if not names:
        return None
    with_nul = st.builds(
        lambda name, text: {name: f"{text}\x00"}, st.sampled_from(names), st.text(max_size=4)
    )
    if "cursor" not in names:
        return with_nul
    return st.one_of(with_nul, decodable_cursors().map(lambda cursor: {"cursor": cursor}))


def requests(
    operation: APIOperation,
    paths: list[dict[str, Any]],
    bodies: st.SearchStrategy[dict[str, Any]] | None,
) -> st.SearchStrategy[schemathesis.Case]:
    """Valid requests as the schema describes them; the same aimed at what exists, with the
    meaningful bodies if any, or with odd query values; and invalid ones (negative mode)
    where the operation takes query parameters or a body. All but the first on paths that
    exist, so they reach the view's own work."""
    existing_path = st.sampled_from(paths or [{}])
    choices = [
        operation.as_strategy(),
        existing_path.flatmap(lambda path: operation.as_strategy(path_parameters=path)),
    ]
    if (queries := odd_queries(operation)) is not None:
        choices.append(
            st.tuples(existing_path, queries).flatmap(
                lambda aimed: operation.as_strategy(path_parameters=aimed[0], query=aimed[1])
            )
        )
    if bodies is not None:
        choices.append(
            st.tuples(existing_path, bodies).flatmap(
                lambda aimed: operation.as_strategy(path_parameters=aimed[0], **aimed[1])
            )
        )
    if operation.query or operation.body:
        choices.append(
            existing_path.flatmap(
                lambda path: operation.as_strategy(GenerationMode.NEGATIVE, path_parameters=path)
            )
        )
    return st.one_of(choices)


@pytest.mark.django_db
@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.label)
def test_every_answer_is_as_documented(
    operation: APIOperation,
    existing: dict[str, list[dict[str, Any]]],
    meaningful_bodies: dict[str, st.SearchStrategy[dict[str, Any]]],
    headers: dict[str, str],
) -> None:
    app = InTestTransaction()
    for found in FOUND.get(operation.label, []):
        operation.Case(**found).call_and_validate(app=app, headers=headers, checks=CHECKS)
    cases = requests(
        operation, existing.get(operation.path, []), meaningful_bodies.get(operation.label)
    )

    @given(case=cases)
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=True,
        database=None,
        # generating cases (not sending them) can be slow on a busy CI machine
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    def answers_as_documented(case: schemathesis.Case) -> None:
        case.call_and_validate(app=app, headers=headers, checks=CHECKS)

    answers_as_documented()
