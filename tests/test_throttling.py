"""Too many requests are refused: the API past its rate (429), the login page past its failed
tries (429, saying which limit), while other clients and usernames are unaffected."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def tiny_rates(settings) -> None:
    settings.REST_FRAMEWORK = {
        **settings.REST_FRAMEWORK,
        "DEFAULT_THROTTLE_RATES": {"anon": "3/minute", "user": "5/minute"},
    }


def test_the_api_refuses_the_request_past_the_user_rate(tiny_rates) -> None:
    client = APIClient()
    client.force_authenticate(User.objects.create_user("ada"))
    assert [client.get("/api/projects/").status_code for _ in range(5)] == [200] * 5
    refused = client.get("/api/projects/")
    assert refused.status_code == 429
    assert "throttled" in refused.json()["detail"].lower()
    assert int(refused["Retry-After"]) > 0

    other = APIClient()
    other.force_authenticate(User.objects.create_user("bob"))
    assert other.get("/api/projects/").status_code == 200


def test_the_api_refuses_anonymous_clients_past_the_anon_rate(tiny_rates) -> None:
    client = APIClient()
    assert [client.get("/api/schema/").status_code for _ in range(3)] == [200] * 3
    assert client.get("/api/schema/").status_code == 429


def log_in(client: Client, username: str, password: str):
    return client.post("/accounts/login/", {"username": username, "password": password})


def test_login_is_refused_after_too_many_failures(settings) -> None:
    settings.LOGIN_MAX_FAILURES = 3
    User.objects.create_user("ada", password="right horse battery")
    client = Client()
    for _ in range(3):
        assert log_in(client, "ada", "wrong").status_code == 200

    refused = log_in(client, "ada", "right horse battery")
    assert refused.status_code == 429
    assert "Too many failed logins" in refused.content.decode()
    assert "LOGIN_MAX_FAILURES" in refused.content.decode()
    assert "_auth_user_id" not in client.session

    # The same username from another address is refused too; after the window it works.
    elsewhere = Client(REMOTE_ADDR="10.0.0.2")
    assert log_in(elsewhere, "ada", "right horse battery").status_code == 429
    cache.clear()
    assert log_in(client, "ada", "right horse battery").status_code == 302


def test_successful_logins_do_not_count(settings) -> None:
    settings.LOGIN_MAX_FAILURES = 2
    User.objects.create_user("ada", password="right horse battery")
    for _ in range(4):
        assert log_in(Client(), "ada", "right horse battery").status_code == 302


def test_the_token_endpoint_counts_failures_with_the_login_page(settings) -> None:
    settings.LOGIN_MAX_FAILURES = 2
    User.objects.create_user("ada", password="right horse battery")
    client = Client()
    wrong = {"username": "ada", "password": "wrong"}
    assert log_in(client, "ada", "wrong").status_code == 200  # one on the login page
    assert client.post("/api/token/", wrong).status_code == 400  # and one here

    refused = client.post("/api/token/", {"username": "ada", "password": "right horse battery"})
    assert refused.status_code == 429
    assert "LOGIN_MAX_FAILURES" in refused.json()["detail"]
    assert int(refused["Retry-After"]) > 0
    assert log_in(client, "ada", "right horse battery").status_code == 429
