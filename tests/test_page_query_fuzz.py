"""Every page, asked with hostile query parameters (NUL characters, huge numbers, negative and
non-numeric ids, markup, SQL, very long text) under every name a page reads, answers as a
page (never 500) and shows none of it as markup. The pages and parameters are enumerated, not
listed by hand: the routes of the permission matrix, the list filter's fields and the names
the views read from `request.GET`."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import User
from django.http import QueryDict
from django.test import Client

from annotate.views.lists import filter_form
from tests.test_permission_matrix import ADMIN, ROUTES, make_world, url_of
from workers.views.evaluation import EvaluationForm

pytestmark = pytest.mark.django_db

HOSTILE_VALUES = [
    "\x00",
    "-1",
    "99999999999999999999999",
    "1e309",
    "<script>alert(1)</script>",
    "' OR 1=1 --",
    "x" * 5000,
]
VIEWS = Path(__file__).resolve().parents[1]


def names_read_by_views() -> set[str]:
    """Query parameters the views read by name (`request.GET.get("...")`)."""
    names: set[str] = set()
    for app in ("annotate", "curation", "workers"):
        for path in (VIEWS / app).rglob("*.py"):
            names |= set(re.findall(r'request\.GET\.get\("(\w+)"', path.read_text()))
    return names


def parameter_names(world: dict) -> list[str]:
    forms = [filter_form(QueryDict(), world["project"]), EvaluationForm(None, ["heuristic"])]
    fields = {name for form in forms for name in form.fields}
    return sorted(fields | names_read_by_views())


PAGES = [route for route in ROUTES if not route.route.startswith(("api/", "admin/"))]


@pytest.mark.parametrize("route", PAGES, ids=[route.name for route in PAGES])
def test_a_page_with_hostile_parameters_answers_without_an_error(route) -> None:
    world = make_world()
    client = Client(raise_request_exception=False)
    client.force_login(User.objects.get(username=ADMIN))
    url = url_of(route, world)
    names = parameter_names(world)
    assert {"q", "after", "queue"} <= set(names), names  # the enumeration finds them
    for value in HOSTILE_VALUES:
        response = client.get(f"{url}?{urlencode({name: value for name in names})}")
        assert response.status_code < 500, (url, repr(value[:20]), response.status_code)
        if response.get("Content-Type", "").startswith("text/html"):
            assert "<script>alert(1)" not in response.content.decode()
