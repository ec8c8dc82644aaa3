"""The `openai` backend: any OpenAI-compatible chat completions server (`vllm serve`, SGLang,
llama.cpp's server, hosted APIs) over plain HTTP, with the standard library only (urllib and a
thread pool), so a worker needs no SDK.

Each request is one POST to `{base_url}/chat/completions`, at most `concurrency` in flight.
429, 408, 5xx, connection errors and timeouts are retried with exponential backoff and
jitter (or the server's Retry-After); other 4xx fail at once. A request that never succeeds
comes back as a result with `error` set, so one bad request never sinks a batch.

The API key is read from an environment variable named `*API_KEY` (options are stored in the
database, the key must not be) and is sent only in the Authorization header; it is scrubbed
from every error text.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.client import HTTPException
from typing import Any
from urllib.parse import urlsplit

from workers.backends.base import BackendError, GenerationRequest, GenerationResult

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
STRUCTURED_MODES = ("json_schema", "guided_json", "json_object", "none")
MAX_WAIT_S = 60.0  # the longest wait between two attempts, whatever Retry-After says
MESSAGE_MAX = 500  # characters of a server's error text kept in a result
_SNIPPET_MAX = 200  # characters of a malformed body quoted in a result
# Only variables named like API keys may be read: a stored config could otherwise send another
# of the worker's secrets (SECRET_KEY, DATABASE_URL) as a bearer token to a server it names.
KEY_ENV_NAME = re.compile(r"[A-Za-z0-9_]*API_KEY")


@dataclass(frozen=True)
class _Failure:
    """One attempt that got no usable HTTP response."""

    message: str
    retryable: bool
    retry_after_s: float | None = None


def retry_delay(retry: int, backoff_s: float, retry_after_s: float | None = None) -> float:
    """Seconds to wait before retry number `retry` (1-based): the server's Retry-After when it
    sent one, else `backoff_s * 2**(retry-1)` of which the upper half is random, so clients
    that failed together do not come back together. Either way at most MAX_WAIT_S."""
    if retry_after_s is not None:
        return min(retry_after_s, MAX_WAIT_S)
    ceiling = min(backoff_s * 2 ** min(retry - 1, 32), MAX_WAIT_S)
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _retry_after_s(value: str | None) -> float | None:
    """Retry-After in seconds; None when absent or an HTTP date (then backoff applies)."""
    try:
        seconds = float(value or "")
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _server_message(data: bytes) -> str:
    """The human part of an error body: OpenAI's `error.message`, vLLM's `message`, FastAPI's
    `detail`, else the body as text."""
    text = data.decode("utf-8", "replace").strip()
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if isinstance(parsed, dict):
        error = parsed.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        for value in (error, parsed.get("message"), parsed.get("detail")):
            if isinstance(value, str):
                return value
    return text


def _token_count(usage: Any, key: str) -> int | None:
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _parse_completion(data: bytes, redact: Callable[[str], str]) -> GenerationResult:
    """A 200's body as a result; an error result when it is not a chat completion."""
    try:
        parsed = json.loads(data)
    except ValueError:
        snippet = redact(data.decode("utf-8", "replace"))[:_SNIPPET_MAX]
        return GenerationResult(error=f"malformed response: not JSON: {snippet!r}")
    choices = parsed.get("choices") if isinstance(parsed, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        return GenerationResult(error="malformed response: no choices[0].message.content")
    raw = {
        "id": parsed.get("id"),
        "model": parsed.get("model"),
        "finish_reason": choice.get("finish_reason"),
    }
    usage = parsed.get("usage")
    return GenerationResult(
        text=content,
        prompt_tokens=_token_count(usage, "prompt_tokens"),
        completion_tokens=_token_count(usage, "completion_tokens"),
        raw={key: value for key, value in raw.items() if value is not None},
    )


def _with_schema_note(
    messages: list[dict[str, Any]], schema: dict[str, Any]
) -> list[dict[str, Any]]:
    """The messages with the schema stated in the system prompt (for servers that can only be
    told "reply in JSON"): appended to a leading system message, else one is put first."""
    note = "Reply with one JSON object that matches this JSON schema:\n" + json.dumps(schema)
    if messages and messages[0].get("role") == "system":
        content = messages[0].get("content")
        if isinstance(content, str):
            return [{**messages[0], "content": f"{content}\n\n{note}"}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


class OpenAICompatibleBackend:
    """Chat completions from an OpenAI-compatible HTTP server.

    `base_url` ends with the API version (`http://127.0.0.1:8001/v1`); unset, it is the
    environment's OPENAI_BASE_URL, else DEFAULT_BASE_URL (a local `vllm serve`). The key is
    the value of the environment variable named by `api_key_env` (a name ending in API_KEY);
    unset or empty, no Authorization header is sent (a local server started without --api-key
    wants none). `timeout_s` bounds every socket wait of one attempt (connecting, or silence
    while reading). `structured` says how a request's `json_schema` is sent (see
    STRUCTURED_MODES and the README). `extra_body` adds server-specific fields to every request
    body (vLLM's `top_k`, `chat_template_kwargs`); it cannot replace the fields set per request.
    """

    kind = "openai"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 8,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        structured: str = "json_schema",
        extra_body: dict[str, Any] | None = None,
        **unknown: Any,
    ) -> None:
        if "api_key" in unknown:
            raise BackendError(
                "the openai backend does not take a literal api_key (options are stored in the "
                "database): put the key in an environment variable of the worker and name that "
                "variable in api_key_env (default OPENAI_API_KEY)"
            )
        if unknown:
            raise BackendError(f"unknown options for the openai backend: {', '.join(unknown)}")
        if not isinstance(model, str) or not model:
            raise BackendError("the openai backend needs a model name (the server's model id)")
        self.model = model
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.base_url = base_url.rstrip("/")
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise BackendError(f"base_url must be an http(s) URL, got {self.base_url!r}")
        if structured not in STRUCTURED_MODES:
            raise BackendError(f"structured must be one of {', '.join(STRUCTURED_MODES)}")
        try:
            self.concurrency = int(concurrency)
            self.max_retries = int(max_retries)
            self.timeout_s = float(timeout_s)
            self.backoff_s = float(backoff_s)
        except (TypeError, ValueError) as exc:
            raise BackendError(f"bad numeric option for the openai backend: {exc}") from None
        if self.concurrency < 1 or self.max_retries < 0:
            raise BackendError("concurrency must be at least 1 and max_retries at least 0")
        if not self.timeout_s > 0 or not self.backoff_s >= 0:
            raise BackendError("timeout_s must be positive and backoff_s not negative")
        if extra_body is not None and not isinstance(extra_body, dict):
            raise BackendError("extra_body must be a JSON object")
        self.structured = structured
        self.extra_body = dict(extra_body or {})
        self.api_key_env = api_key_env or ""
        if self.api_key_env and not KEY_ENV_NAME.fullmatch(self.api_key_env):
            raise BackendError(
                f"api_key_env must name a variable ending in API_KEY, got {self.api_key_env!r}"
            )
        self._api_key = os.environ.get(self.api_key_env, "").strip() if self.api_key_env else ""
        if any(ch.isspace() or not ch.isprintable() for ch in self._api_key):
            raise BackendError(f"the API key in ${self.api_key_env} has spaces or control chars")
        self._pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix="openai-backend")

    def __repr__(self) -> str:
        return (
            f"OpenAICompatibleBackend(model={self.model!r}, base_url={self.base_url!r}, "
            f"api_key_env={self.api_key_env!r}, structured={self.structured!r})"
        )

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        try:
            return list(self._pool.map(self._generate_one, requests))
        except RuntimeError as exc:  # the pool refuses work once shut down
            raise BackendError(f"the openai backend is closed: {exc}") from None

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _payload(self, request: GenerationRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            **self.extra_body,
            "model": self.model,
            "messages": request.messages,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        schema = request.json_schema
        if schema is None or self.structured == "none":
            return body
        if self.structured == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": schema, "strict": True},
            }
        elif self.structured == "guided_json":
            body["guided_json"] = schema
        else:
            body["response_format"] = {"type": "json_object"}
            body["messages"] = _with_schema_note(request.messages, schema)
        return body

    def _generate_one(self, request: GenerationRequest) -> GenerationResult:
        started = time.monotonic()
        attempts = 0
        try:
            data = json.dumps(self._payload(request)).encode()
            while True:
                attempts += 1
                outcome = self._post(data)
                if not isinstance(outcome, _Failure):
                    result = _parse_completion(outcome, self._redact)
                    break
                if not outcome.retryable or attempts > self.max_retries:
                    gave_up = f" (gave up after {attempts} attempts)" if attempts > 1 else ""
                    result = GenerationResult(error=outcome.message + gave_up)
                    break
                time.sleep(retry_delay(attempts, self.backoff_s, outcome.retry_after_s))
        except Exception as exc:  # the Backend contract: a request's failure is never raised
            message = self._redact(f"{type(exc).__name__}: {exc}")[:MESSAGE_MAX]
            result = GenerationResult(error=message)
        result.error = self._redact(result.error)  # texts cut at their source were redacted there
        result.attempts = max(attempts, 1)
        result.latency_s = time.monotonic() - started
        return result

    def _post(self, data: bytes) -> bytes | _Failure:
        """One attempt: the body of a 2xx response, or why there is none."""
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": "trajectory-curation-studio",
        }
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(
            f"{self.base_url}/chat/completions", data=data, headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return response.read()
        except urllib.error.HTTPError as exc:
            return self._http_failure(exc)
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, TimeoutError):
                return self._timeout()
            return _Failure(f"connection error: {exc.reason}", retryable=True)
        except TimeoutError:
            return self._timeout()
        except (OSError, HTTPException) as exc:
            return _Failure(f"connection error: {type(exc).__name__}: {exc}", retryable=True)

    def _timeout(self) -> _Failure:
        return _Failure(f"timed out after {self.timeout_s:g}s", retryable=True)

    def _http_failure(self, exc: urllib.error.HTTPError) -> _Failure:
        try:
            message = _server_message(exc.read())
        except (OSError, HTTPException):
            message = str(exc.reason)
        finally:
            exc.close()
        message = self._redact(message)[:MESSAGE_MAX]
        if exc.code in (401, 403) and not self._api_key:
            unset = f"${self.api_key_env} is not set" if self.api_key_env else "no api_key_env"
            message += f" (no API key sent: {unset})"
        retryable = exc.code in (408, 429) or exc.code >= 500
        retry_after = (
            _retry_after_s(exc.headers.get("Retry-After")) if exc.headers is not None else None
        )
        return _Failure(f"HTTP {exc.code}: {message}", retryable, retry_after)

    def _redact(self, text: str) -> str:
        return text.replace(self._api_key, "[redacted]") if self._api_key else text
