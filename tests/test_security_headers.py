"""Every response carries the security headers; no template needs inline script or style."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

TEMPLATES = Path(settings.BASE_DIR) / "templates"
INLINE = {
    "inline script": re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I),
    "style attribute": re.compile(r"\sstyle\s*=", re.I),
    "style element": re.compile(r"<style\b", re.I),
    "event handler attribute": re.compile(r"\son[a-z]+\s*=", re.I),
    "javascript: URL": re.compile(r"javascript:", re.I),
    "htmx inline handler": re.compile(r"\shx-on", re.I),
}


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/api/schema/", "/", "/api/projects/"])
def test_responses_carry_the_security_headers(path: str) -> None:
    response = Client().get(path)
    policy = response["Content-Security-Policy"]
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    for directive in ("default-src 'self'", "script-src 'self'", "style-src 'self'"):
        assert directive in policy
    assert "frame-ancestors 'none'" in policy and "object-src 'none'" in policy
    assert response["X-Frame-Options"] == "DENY"
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"


def test_no_template_has_inline_script_or_style() -> None:
    found = [
        f"{path.relative_to(TEMPLATES)}: {what}"
        for path in sorted(TEMPLATES.rglob("*.html"))
        for what, pattern in INLINE.items()
        if pattern.search(path.read_text())
    ]
    assert not found, found


def test_htmx_does_not_inject_its_indicator_style() -> None:
    base = (TEMPLATES / "base.html").read_text()
    assert '<meta name="htmx-config" content=\'{"includeIndicatorStyles": false}\'>' in base
