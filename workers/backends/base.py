"""The one interface every model backend implements. Plain Python: no Django imports, so a
backend can run in any worker process (or outside the app altogether)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class GenerationRequest:
    """One chat completion to make.

    `json_schema`, when given, is the shape the reply must have; backends that can enforce it
    (guided / grammar-constrained decoding, `response_format`) do, the others only ask for it.
    `context` is the structured data the prompt was built from (the trajectory, the question
    asked of it); a backend without a model (the heuristic) reads it instead of `messages`.
    """

    messages: list[dict[str, Any]]
    json_schema: dict[str, Any] | None = None
    max_tokens: int = 1024
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    context: dict[str, Any] | None = None


@dataclass
class GenerationResult:
    """What came back for one request. `error` is non-empty when no reply could be had (after
    the backend's own retries); `text` is then empty. Token counts are None where unknown."""

    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0
    attempts: int = 1
    error: str = ""
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.error


class BackendError(Exception):
    """A backend that cannot be built or used at all (bad settings, missing package)."""


class Backend(Protocol):
    """Turns a batch of requests into results, one per request, in the same order. A failure
    of one request is reported in its result, never raised, so a batch always completes."""

    kind: str
    model: str

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]: ...

    def close(self) -> None: ...
