"""DRF's token authentication, refusing a token with a NUL character as unknown (401):
PostgreSQL cannot compare text holding one, so DRF's lookup would raise."""

from __future__ import annotations

from typing import Any

from rest_framework import authentication, exceptions


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate_credentials(self, key: str) -> tuple[Any, Any]:
        if "\x00" in key:
            raise exceptions.AuthenticationFailed("Invalid token.")
        return super().authenticate_credentials(key)
