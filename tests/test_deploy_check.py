"""`manage.py check --deploy` with the production switches on (HTTPS=1, a real SECRET_KEY,
DEBUG off) raises nothing but the two HSTS choices that depend on the operator's domain."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOMAIN_CHOICES = {"security.W005", "security.W021"}  # HSTS for subdomains, HSTS preload list


def production_environment() -> dict[str, str]:
    """This process's environment less what the test run sets for itself (the browser tests
    allow Django's sync calls from async code, which a deployment must not)."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    return {**env, "DEBUG": "0"}


def deploy_check(**env: str) -> set[str]:
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=ROOT,
        env={**production_environment(), "SECRET_KEY": secrets.token_urlsafe(50), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return set(re.findall(r"\((\w+\.[EW]\d+)\)", result.stdout + result.stderr))


def test_a_production_configuration_passes_the_deploy_check() -> None:
    assert deploy_check(HTTPS="1") <= DOMAIN_CHOICES


def test_without_https_the_check_names_the_insecure_cookies() -> None:
    assert {"security.W012", "security.W016"} <= deploy_check(HTTPS="0")
