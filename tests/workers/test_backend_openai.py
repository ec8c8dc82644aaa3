"""The `openai` backend against a real HTTP server on 127.0.0.1, scripted per test."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from workers.backends import make_backend
from workers.backends.base import BackendError, GenerationRequest
from workers.backends.openai_compatible import MAX_WAIT_S, OpenAICompatibleBackend, retry_delay

SCHEMA = {
    "type": "object",
    "properties": {"verdict": {"enum": ["success", "failure"]}},
    "required": ["verdict"],
    "additionalProperties": False,
}
KEY = "sk-test-5f1e9c0d2b7a"


def completion(text: str, prompt_tokens: int = 11, completion_tokens: int = 7) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "served-model",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }


def ask(text: str = "hello", **fields: Any) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": text}], **fields)


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] | bytes = field(default_factory=lambda: completion("ok"))
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class FakeServer:
    """Answers the n-th POST (0-based) with `respond(n, body)`; records every request and the
    most requests ever in flight at once. Delays end early when the test is over."""

    def __init__(self) -> None:
        self.respond: Callable[[int, dict[str, Any]], Reply] = lambda n, body: Reply()
        self.seen: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.fake = self
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class _Server(ThreadingHTTPServer):
    fake: FakeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that timed out has gone; writing to it fails, which is expected here."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        fake = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with fake.lock:
            n = len(fake.seen)
            fake.seen.append(Seen(self.path, dict(self.headers), body))
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        try:
            reply = fake.respond(n, body)
            fake.stopping.wait(reply.delay_s)
            data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        finally:
            with fake.lock:
                fake.in_flight -= 1

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    yield fake
    fake.stop()


@pytest.fixture
def build(server: FakeServer) -> Iterator[Callable[..., OpenAICompatibleBackend]]:
    """Backends on the fake server with a tiny backoff; closed after the test."""
    made: list[OpenAICompatibleBackend] = []

    def build(**options: Any) -> OpenAICompatibleBackend:
        options.setdefault("base_url", server.url)
        options.setdefault("backoff_s", 0.001)
        backend = OpenAICompatibleBackend("test-model", **options)
        made.append(backend)
        return backend

    yield build
    for backend in made:
        backend.close()


def test_success_fills_text_usage_and_raw(server, build) -> None:
    backend = build()
    first, second = backend.generate(
        [ask("hi", max_tokens=64, temperature=0.2, top_p=0.9, seed=7), ask("again")]
    )

    assert first.ok and first.text == "ok"
    assert (first.prompt_tokens, first.completion_tokens, first.attempts) == (11, 7, 1)
    assert first.raw == {"id": "chatcmpl-1", "model": "served-model", "finish_reason": "stop"}
    assert first.latency_s > 0
    sent = {seen.body["messages"][0]["content"]: seen for seen in server.seen}
    assert sent["hi"].path == "/v1/chat/completions"
    assert sent["hi"].body == {
        "model": "test-model",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 64,
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 7,
    }
    assert "seed" not in sent["again"].body and second.ok
    assert "Authorization" not in sent["hi"].headers  # no key in the environment


def test_missing_usage_leaves_token_counts_unknown(server, build) -> None:
    server.respond = lambda n, body: Reply(body={"choices": [{"message": {"content": "x"}}]})
    [result] = build().generate([ask()])
    assert result.ok and result.text == "x"
    assert (result.prompt_tokens, result.completion_tokens, result.raw) == (None, None, {})


def test_extra_body_is_added_but_cannot_replace_request_fields(server, build) -> None:
    backend = build(extra_body={"top_k": 20, "model": "other", "max_tokens": 1})
    backend.generate([ask(max_tokens=50)])
    body = server.seen[0].body
    assert (body["top_k"], body["model"], body["max_tokens"]) == (20, "test-model", 50)


def test_structured_json_schema_sends_response_format(server, build) -> None:
    build().generate([ask(json_schema=SCHEMA)])
    assert server.seen[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "schema": SCHEMA, "strict": True},
    }
    assert "guided_json" not in server.seen[0].body


def test_structured_guided_json_sends_vllm_field(server, build) -> None:
    build(structured="guided_json").generate([ask(json_schema=SCHEMA)])
    assert server.seen[0].body["guided_json"] == SCHEMA
    assert "response_format" not in server.seen[0].body


def test_structured_json_object_states_the_schema_in_the_system_prompt(server, build) -> None:
    plain = ask(json_schema=SCHEMA)
    with_system = GenerationRequest(
        messages=[{"role": "system", "content": "You judge."}, {"role": "user", "content": "x"}],
        json_schema=SCHEMA,
    )
    build(structured="json_object", concurrency=1).generate([plain, with_system])

    first, second = (seen.body for seen in server.seen)
    assert first["response_format"] == second["response_format"] == {"type": "json_object"}
    assert first["messages"][0]["role"] == "system"
    assert json.dumps(SCHEMA) in first["messages"][0]["content"]
    assert first["messages"][1:] == plain.messages
    assert len(second["messages"]) == 2
    assert second["messages"][0]["content"].startswith("You judge.\n\n")
    assert json.dumps(SCHEMA) in second["messages"][0]["content"]


def test_structured_none_sends_no_constraint(server, build) -> None:
    build(structured="none").generate([ask(json_schema=SCHEMA)])
    body = server.seen[0].body
    assert "response_format" not in body and "guided_json" not in body
    assert body["messages"] == [{"role": "user", "content": "hello"}]


def test_no_schema_sends_no_constraint_in_any_mode(server, build) -> None:
    build(structured="guided_json").generate([ask()])
    assert "guided_json" not in server.seen[0].body


def test_429_with_retry_after_is_retried(server, build) -> None:
    server.respond = lambda n, body: (
        Reply(429, {"error": {"message": "slow down"}}, {"Retry-After": "0"}) if n == 0 else Reply()
    )
    [result] = build(backoff_s=30.0).generate([ask()])  # Retry-After: 0 beats the backoff
    assert result.ok and result.text == "ok"
    assert result.attempts == 2 and len(server.seen) == 2
    assert result.latency_s < 5


@pytest.mark.parametrize("status", [500, 502, 408])
def test_5xx_and_408_are_retried(server, build, status) -> None:
    server.respond = lambda n, body: Reply(status, b"upstream crashed") if n == 0 else Reply()
    [result] = build().generate([ask()])
    assert result.ok and result.attempts == 2


def test_retries_run_out_into_an_error_result(server, build) -> None:
    server.respond = lambda n, body: Reply(503, {"object": "error", "message": "overloaded"})
    [result] = build(max_retries=2).generate([ask()])
    assert not result.ok and result.text == ""
    assert result.attempts == 3 and len(server.seen) == 3
    assert "HTTP 503: overloaded" in result.error and "3 attempts" in result.error


def test_timeout_is_retried_then_reported(server, build) -> None:
    server.respond = lambda n, body: Reply(delay_s=10)
    [result] = build(timeout_s=0.3, max_retries=1).generate([ask()])
    assert not result.ok
    assert "timed out after 0.3s" in result.error
    assert result.attempts == 2 and len(server.seen) == 2
    assert 0.6 <= result.latency_s < 5


def test_connection_refused_is_retried_then_reported(build) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    [result] = build(base_url=f"http://127.0.0.1:{port}/v1", max_retries=2).generate([ask()])
    assert not result.ok and result.error.startswith("connection error")
    assert result.attempts == 3


@pytest.mark.parametrize(
    "body",
    [
        b"<html>bad gateway</html>",
        {"choices": []},
        {"choices": [{"message": {"role": "assistant", "content": None}}]},
        {"object": "list", "data": []},
    ],
)
def test_malformed_200_is_an_error_result(server, build, body) -> None:
    server.respond = lambda n, _: Reply(body=body)
    [result] = build().generate([ask()])
    assert result.error.startswith("malformed response:")
    assert result.text == "" and result.attempts == 1


def test_400_fails_at_once_with_the_server_message(server, build) -> None:
    message = "max_tokens is too large: 99999. " + "x" * 5000
    server.respond = lambda n, body: Reply(400, {"error": {"message": message, "code": 400}})
    [result] = build().generate([ask()])
    assert result.attempts == 1 and len(server.seen) == 1
    assert result.error.startswith("HTTP 400: max_tokens is too large: 99999.")
    assert len(result.error) < 600  # the server's text is cut


def test_concurrency_limit_is_respected(server, build) -> None:
    server.respond = lambda n, body: Reply(delay_s=0.1)
    results = build(concurrency=3).generate([ask(str(n)) for n in range(12)])
    assert len(server.seen) == 12 and all(result.ok for result in results)
    assert server.max_in_flight == 3


def test_results_keep_request_order_and_one_failure_spares_the_rest(server, build) -> None:
    def respond(n: int, body: dict[str, Any]) -> Reply:
        index = int(body["messages"][0]["content"])
        if index == 3:
            return Reply(400, {"error": {"message": "bad request 3"}})
        return Reply(body=completion(f"reply {index}"), delay_s=(8 - index) * 0.03)

    server.respond = respond
    results = build(concurrency=8).generate([ask(str(n)) for n in range(8)])
    assert [result.text for result in results] == ["" if n == 3 else f"reply {n}" for n in range(8)]
    assert results[3].error == "HTTP 400: bad request 3"
    assert all(result.ok for n, result in enumerate(results) if n != 3)


def test_api_key_from_env_is_sent_as_bearer_and_never_shown(server, build, monkeypatch) -> None:
    monkeypatch.setenv("JUDGE_API_KEY", KEY)
    replies = {
        "ok": Reply(),
        "401": Reply(401, {"error": {"message": f"Incorrect API key provided: {KEY}"}}),
        "503": Reply(503, {"error": {"message": f"overloaded for {KEY}"}}),
        "html": Reply(body=f"<p>{'.' * 190}{KEY}</p>".encode()),  # the key spans the cut
    }
    server.respond = lambda n, body: replies[body["messages"][0]["content"]]
    backend = build(api_key_env="JUDGE_API_KEY", max_retries=1)
    results = backend.generate([ask(name) for name in replies])

    assert {seen.headers["Authorization"] for seen in server.seen} == {f"Bearer {KEY}"}
    assert results[0].ok
    errors = [result.error for result in results[1:]]
    assert errors[0].startswith("HTTP 401: Incorrect API key provided: [redacted]")
    assert errors[1].startswith("HTTP 503: overloaded for [redacted]")
    assert errors[2].startswith("malformed response")
    for text in [*errors, repr(backend), *(repr(result) for result in results)]:
        assert KEY[:6] not in text  # not even the start of it


def test_401_without_a_key_names_the_variable(server, build) -> None:
    server.respond = lambda n, body: Reply(401, {"error": {"message": "missing key"}})
    [result] = build().generate([ask()])
    assert result.error == "HTTP 401: missing key (no API key sent: $OPENAI_API_KEY is not set)"


def test_base_url_falls_back_to_the_environment(server, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/")
    backend = OpenAICompatibleBackend("test-model")
    try:
        [result] = backend.generate([ask()])
    finally:
        backend.close()
    assert result.ok and server.seen[0].path == "/v1/chat/completions"


def test_literal_api_key_option_is_refused() -> None:
    with pytest.raises(BackendError, match="environment variable") as refused:
        make_backend("openai", "test-model", {"api_key": KEY})
    assert KEY not in str(refused.value)


@pytest.mark.parametrize(
    ("model", "options", "complaint"),
    [
        ("", {}, "model name"),
        ("m", {"temperature": 0.5}, "unknown options"),
        ("m", {"structured": "xml"}, "structured must be"),
        ("m", {"concurrency": 0}, "concurrency"),
        ("m", {"timeout_s": "soon"}, "numeric"),
        ("m", {"base_url": "ftp://host/v1"}, "http"),
        ("m", {"extra_body": ["top_k"]}, "extra_body"),
        ("m", {"api_key_env": "SECRET_KEY"}, "ending in API_KEY"),
        ("m", {"api_key_env": "DATABASE_URL"}, "ending in API_KEY"),
    ],
)
def test_bad_options_are_refused(model, options, complaint) -> None:
    with pytest.raises(BackendError, match=complaint):
        make_backend("openai", model, options)


def test_closed_backend_refuses_work(build) -> None:
    backend = build()
    backend.close()
    with pytest.raises(BackendError, match="closed"):
        backend.generate([ask()])


def test_retry_delay_grows_with_jitter_and_honours_retry_after() -> None:
    assert retry_delay(1, 1.0, retry_after_s=2.5) == 2.5
    assert retry_delay(1, 1.0, retry_after_s=3600) == MAX_WAIT_S
    for retry, ceiling in [(1, 1.0), (2, 2.0), (4, 8.0), (40, MAX_WAIT_S)]:
        delays = {retry_delay(retry, 1.0) for _ in range(20)}
        assert all(ceiling / 2 <= delay <= ceiling for delay in delays)
        assert len(delays) > 1  # jittered
