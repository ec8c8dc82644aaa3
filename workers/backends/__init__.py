"""Model backends behind one interface (`base.Backend`). `make_backend` builds one from a
judge or teacher config's backend kind, model name and options, importing the heavy
packages (torch, vllm) only for the kind that needs them."""

from __future__ import annotations

from typing import Any

from workers.backends.base import Backend, BackendError, GenerationRequest, GenerationResult

KINDS = ("heuristic", "openai", "transformers", "vllm", "critic")

__all__ = ["KINDS", "Backend", "BackendError", "GenerationRequest", "GenerationResult"]


def make_backend(kind: str, model: str = "", options: dict[str, Any] | None = None) -> Backend:
    options = dict(options or {})
    if kind == "heuristic":
        from workers.backends.heuristic import HeuristicBackend

        return HeuristicBackend()
    if kind == "openai":
        from workers.backends.openai_compatible import OpenAICompatibleBackend

        return OpenAICompatibleBackend(model, **options)
    if kind == "transformers":
        from workers.backends.transformers_local import TransformersBackend

        return TransformersBackend(model, **options)
    if kind == "vllm":
        from workers.backends.vllm_engine import VLLMBackend

        return VLLMBackend(model, **options)
    if kind == "critic":
        from workers.backends.critic import CriticBackend

        return CriticBackend(model, **options)
    raise BackendError(f"unknown backend {kind!r}; choose one of {', '.join(KINDS)}")
