"""Browser tests: Playwright driving Debian's Chromium (never a downloaded browser).

They skip, saying why, where Chromium or Playwright is missing; under CI they must run, so
there a missing browser is an error (.ci/run installs Debian's chromium).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from urllib.parse import urlparse

import pytest

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def _missing() -> str:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed"
    if not shutil.which(CHROMIUM):
        return f"no Chromium at {CHROMIUM} (apt-get install chromium)"
    return ""


@pytest.fixture(scope="session")
def browser() -> Iterator:
    if reason := _missing():
        if os.environ.get("CI"):
            pytest.fail(f"browser tests must run in CI: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread, which makes Django refuse ORM
    # calls here; the tests' own ORM calls are synchronous and safe.
    patch = pytest.MonkeyPatch()
    patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield chromium
        chromium.close()
    patch.undo()


class Watched:
    """A page with what it tried that it must not: dialogs (alert) and requests off the server."""

    def __init__(self, page, origin: str) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.outside: list[str] = []
        page.on("dialog", self._dialog)
        page.route("**/*", self._route(origin))

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def _route(self, origin: str):
        host = urlparse(origin).netloc

        def handle(route) -> None:
            if urlparse(route.request.url).netloc == host:
                route.continue_()
            else:
                self.outside.append(route.request.url)
                route.abort()

        return handle


@pytest.fixture
def page(browser, live_server) -> Iterator[Watched]:
    context = browser.new_context()
    watched = Watched(context.new_page(), live_server.url)
    yield watched
    context.close()


def log_in(page, live_server, username: str, password: str) -> None:
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
