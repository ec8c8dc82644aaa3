"""Security headers Django 5.2 does not send itself (a strict Content-Security-Policy), and the
API and login throttles.

No inline script, style or event handler runs: the pages load their JavaScript and CSS from
static files only, so hostile trajectory text that slipped past escaping still could not run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse
from rest_framework.settings import api_settings
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle


class ContentSecurityPolicyMiddleware:
    """Adds `settings.CONTENT_SECURITY_POLICY` to every response that does not set its own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if settings.CONTENT_SECURITY_POLICY:
            response.headers.setdefault("Content-Security-Policy", settings.CONTENT_SECURITY_POLICY)
        return response


class AnonApiThrottle(AnonRateThrottle):
    """DRF's anonymous throttle, reading its rate when asked (DRF's own copies the rates at
    import, so a changed setting would not reach it)."""

    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)


class UserApiThrottle(UserRateThrottle):
    def get_rate(self) -> str | None:
        return api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)


class LoginFailures:
    """Failed logins from one address and for one username, counted in the cache for
    LOGIN_FAILURE_WINDOW_S seconds: past LOGIN_MAX_FAILURES of either, tries are refused."""

    def __init__(self, request: HttpRequest, username: Any) -> None:
        address = request.META.get("REMOTE_ADDR", "")
        # Hashed: a username is any text, and a cache key must be short and plain.
        name = hashlib.sha256(str(username or "").strip().lower().encode()).hexdigest()
        self.keys = [f"login-failures:ip:{address}", f"login-failures:user:{name}"]

    def refusal(self) -> str:
        """Why a try is refused now, or "" when it may go ahead."""
        limit = settings.LOGIN_MAX_FAILURES
        if any(cache.get(key, 0) >= limit for key in self.keys):
            return (
                f"Too many failed logins ({limit} within {settings.LOGIN_FAILURE_WINDOW_S} "
                "seconds, LOGIN_MAX_FAILURES): wait and try again."
            )
        return ""

    def add(self) -> None:
        for key in self.keys:
            cache.add(key, 0, timeout=settings.LOGIN_FAILURE_WINDOW_S)
            cache.incr(key)


class ThrottledLoginView(LoginView):
    """The login page, refusing further tries (429) after too many failed ones."""

    def failures(self) -> LoginFailures:
        return LoginFailures(self.request, self.request.POST.get("username"))

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if refused := self.failures().refusal():
            return self.render_to_response(self.get_context_data(refused=refused), status=429)
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        self.failures().add()
        return super().form_invalid(form)
