"""The `vllm` backend: an in-process `vllm.LLM` engine in a GPU worker, a whole batch of
requests in one engine call (vLLM schedules them together), each with its own SamplingParams.

A request's JSON schema goes to vLLM's structured outputs (`StructuredOutputsParams` in recent
vLLM, `GuidedDecodingParams` before it), whose default engine is xgrammar, the same grammar
engine the `transformers` backend uses, with free whitespace off as there. A reply cut by
max_tokens before its JSON closed is an error result, never a reply.

vLLM is imported only here and only when a backend is built, so the rest of the app runs
without it. A process holds one engine (it takes most of the GPU): a backend on another model or
other engine settings drops the one before, whose memory comes back once no backend holds it.
"""

from __future__ import annotations

import dataclasses
import gc
import inspect
import json
import threading
import time
from collections.abc import Sequence
from typing import Any

from workers.backends.base import BackendError, GenerationRequest, GenerationResult

CUT_ERROR = "cut at max_tokens ({n}) before the JSON was complete"

_engine: tuple[str, Any] | None = None  # (settings key, vllm.LLM)
_engine_lock = threading.Lock()


def _vllm() -> Any:
    try:
        import vllm
    except ImportError as error:
        raise BackendError(
            f"the vllm backend needs vLLM, which is not installed here ({error}): "
            "pip install '.[gpu]' on a GPU worker"
        ) from None
    return vllm


def _release() -> None:
    """Drop the process's engine and give its GPU memory back before another is built."""
    global _engine
    _engine = None
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _llm(model: str, settings: dict[str, Any]) -> Any:
    global _engine
    key = json.dumps([model, settings], sort_keys=True, default=repr)
    with _engine_lock:
        if _engine is not None and _engine[0] == key:
            return _engine[1]
        vllm = _vllm()
        if _engine is not None:
            _release()
        try:
            llm = vllm.LLM(model=model, **settings)
        except Exception as error:  # bad settings, no GPU, weights that do not load
            raise BackendError(f"vLLM could not start {model!r}: {error}") from error
        _engine = (key, llm)
        return llm


def structured_params(schema: dict[str, Any]) -> dict[str, Any]:
    """The SamplingParams keyword that holds `schema` to the reply, for the vLLM installed:
    `structured_outputs=StructuredOutputsParams(...)` (vLLM >= 0.10.2; the older name was
    removed in 0.12) or `guided_decoding=GuidedDecodingParams(...)` before it."""
    params = _vllm().sampling_params
    cls = getattr(params, "StructuredOutputsParams", None)
    keyword = "structured_outputs"
    if cls is None:
        cls, keyword = params.GuidedDecodingParams, "guided_decoding"
    options: dict[str, Any] = {"json": schema}
    if "disable_any_whitespace" in {f.name for f in dataclasses.fields(cls)}:
        options["disable_any_whitespace"] = True
    return {keyword: cls(**options)}


def sampling_params(request: GenerationRequest) -> Any:
    """vLLM's SamplingParams for one request (temperature 0 is greedy in vLLM)."""
    structured = {} if request.json_schema is None else structured_params(request.json_schema)
    return _vllm().SamplingParams(
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        top_p=request.top_p,
        seed=request.seed,
        **structured,
    )


def _can_sanitize(tokenizer: Any) -> bool:
    """Whether the engine's tokenizer is a transformers one that can encode control tokens in
    messages as text (transformers >= 5). Asked of the class: vLLM wraps the method."""
    from transformers import PreTrainedTokenizerBase

    template = PreTrainedTokenizerBase.apply_chat_template
    return isinstance(tokenizer, PreTrainedTokenizerBase) and (
        "sanitize_control_tokens" in inspect.signature(template).parameters
    )


def _complete_json(text: str) -> bool:
    try:
        json.loads(text, strict=False)
    except ValueError:
        return False
    return True


class VLLMBackend:
    """vLLM in this process. `model` is a local folder or a model name vLLM can load (on an
    offline GPU worker, a folder or a model already in the Hugging Face cache).
    `tensor_parallel_size`, `gpu_memory_utilization` and `max_model_len` (None: the model's own)
    go to `vllm.LLM` with any other `engine_options` (`dtype`, `enforce_eager`, `quantization`,
    `structured_outputs_config`...)."""

    kind = "vllm"

    def __init__(
        self,
        model: str,
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = None,
        **engine_options: Any,
    ) -> None:
        if not model:
            raise BackendError("the vllm backend needs `model`: a local folder or a model name")
        self.model = model
        settings = {
            "tensor_parallel_size": tensor_parallel_size,
            "gpu_memory_utilization": gpu_memory_utilization,
            **engine_options,
        }
        if max_model_len is not None:
            settings["max_model_len"] = max_model_len
        self.llm = _llm(model, settings)
        self.sanitizes_control_tokens = _can_sanitize(self.llm.get_tokenizer())

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        if not requests:
            return []
        try:
            return self._generate(list(requests))
        except Exception as error:  # one request vLLM refuses (too long, bad params) fails all
            if len(requests) == 1:
                return [GenerationResult(error=f"vLLM: {type(error).__name__}: {error}")]
            return [self.generate([request])[0] for request in requests]

    def close(self) -> None:
        """Nothing to release: the engine stays up for the next backend in this process."""

    def _generate(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        params = [sampling_params(r) for r in requests]
        started = time.perf_counter()
        if self.sanitizes_control_tokens:
            outputs = self.llm.generate(self._prompts(requests), params, use_tqdm=False)
        else:
            conversations = [r.messages for r in requests]
            outputs = self.llm.chat(conversations, params, use_tqdm=False)
        latency = time.perf_counter() - started
        return [
            _result(request, output, latency)
            for request, output in zip(requests, outputs, strict=True)
        ]

    def _prompts(self, requests: list[GenerationRequest]) -> list[dict[str, Any]]:
        """Token prompts rendered with the chat template, control tokens written inside the
        messages (trajectory text is untrusted) encoded as plain text; `llm.chat` would encode
        them as real turn boundaries. Used where the tokenizer can (transformers >= 5)."""
        tokenizer = self.llm.get_tokenizer()
        prompts = []
        for request in requests:
            encoded = tokenizer.apply_chat_template(
                request.messages,
                add_generation_prompt=True,
                tokenize=True,
                return_dict=True,
                sanitize_control_tokens=True,
            )
            prompts.append({"prompt_token_ids": list(encoded["input_ids"])})
        return prompts


def _result(request: GenerationRequest, output: Any, latency: float) -> GenerationResult:
    completion = output.outputs[0]
    finish = completion.finish_reason
    result = GenerationResult(
        prompt_tokens=len(output.prompt_token_ids or []),
        completion_tokens=len(completion.token_ids),
        latency_s=latency,
        raw={"finish_reason": finish, "request_id": output.request_id},
    )
    if finish not in ("stop", "length"):
        result.error = f"vLLM ended the request without a reply (finish_reason {finish!r})"
    elif (
        request.json_schema is not None
        and finish == "length"
        and not _complete_json(completion.text)
    ):
        result.error = CUT_ERROR.format(n=request.max_tokens)
    else:
        result.text = completion.text
    return result
