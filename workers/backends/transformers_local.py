"""The `transformers` backend: a local model (a folder with weights, tokenizer and chat template;
never downloaded) run with Hugging Face transformers on the CPU or one GPU.

A request with a JSON schema is decoded under an xgrammar grammar built from that schema
(no free whitespace, no properties or items the schema does not name). xgrammar is also vLLM's
default structured-output engine, so both local backends hold a model to a schema the same way.

Token choice happens here, not in `generate`: one logits processor per batch masks each row
with its own grammar, then takes the best token (temperature 0) or samples one with the row's
temperature, top_p and its own seeded generator, and hands `generate` that token alone, which
then runs greedy. So one batch mixes schemas, sampling settings and budgets; a request's seed
gives the same draws whatever else shares its batch; and the mask comes before top_p (custom
processors run after transformers' own warpers, where a top_p cut can keep only tokens the
grammar forbids and leave nothing to sample).

The model is loaded once per process and kept (module cache keyed by path, device and dtype),
so a worker that builds a backend per task pays the load once.
"""

from __future__ import annotations

import inspect
import json
import re
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workers.backends.base import BackendError, GenerationRequest, GenerationResult

try:
    import torch
    import xgrammar as xgr
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        GenerationConfig,
        LogitsProcessor,
        LogitsProcessorList,
    )
except ImportError as error:  # the `local` extra is not installed
    raise BackendError(
        f"the transformers backend needs torch, transformers and xgrammar ({error}): "
        "pip install '.[local]'"
    ) from error

GRAMMAR_CACHE = 256  # compiled grammars kept per model (one per distinct schema)
CUT_ERROR = "cut at max_tokens ({n}) before the JSON was complete"
_SURROGATE = re.compile("[\ud800-\udfff]")
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass
class Engine:
    """A loaded model with its tokenizer and grammar compiler; shared by every backend built
    on the same (path, device, dtype) in this process, one generation at a time."""

    model: Any
    tokenizer: Any
    stop_ids: list[int]
    pad_id: int
    vocab_size: int
    context: int | None  # the model's longest sequence, where its config says
    compiler: xgr.GrammarCompiler
    token_bytes: list[bytes]  # each token's text as the grammar engine sees it
    sanitize: bool  # the tokenizer can encode control tokens in messages as plain text
    lock: threading.Lock = field(default_factory=threading.Lock)
    grammars: dict[str, xgr.CompiledGrammar] = field(default_factory=dict)

    def grammar(self, schema: dict[str, Any]) -> xgr.CompiledGrammar:
        key = json.dumps(schema)  # key order matters: the grammar writes properties in it
        compiled = self.grammars.get(key)
        if compiled is None:
            compiled = self.compiler.compile_json_schema(
                key, any_whitespace=False, strict_mode=True
            )
            if len(self.grammars) >= GRAMMAR_CACHE:
                del self.grammars[next(iter(self.grammars))]
            self.grammars[key] = compiled
        return compiled

    def encode(self, messages: list[dict[str, Any]]) -> list[int]:
        """The prompt's token ids. Where transformers can, control tokens written inside the
        messages (trajectory text is untrusted) are encoded as text, so no step can close its
        turn or open a system one."""
        extra = {"sanitize_control_tokens": True} if self.sanitize else {}
        encoded = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=True, **extra
        )
        return list(encoded["input_ids"])


_ENGINES: dict[tuple[str, str, str], Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise BackendError(f"unknown device {name!r}: {error}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BackendError(f"device {name!r} asked for, but torch sees no CUDA device")
    return device


def _dtype(name: str, device: torch.device) -> torch.dtype:
    if name == "auto":
        if device.type == "cpu":
            return torch.float32
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if name not in _DTYPES:
        raise BackendError(f"unknown dtype {name!r}; choose auto or one of {', '.join(_DTYPES)}")
    return _DTYPES[name]


def _ids(value: Any) -> list[int]:
    if value is None:
        return []
    return [value] if isinstance(value, int) else list(value)


def _load(path: str, device: torch.device, dtype: torch.dtype) -> Engine:
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=dtype)
    except (OSError, ValueError) as error:
        raise BackendError(f"cannot load a causal LM from {path}: {error}") from None
    if not tokenizer.chat_template:
        raise BackendError(f"the tokenizer in {path} has no chat template")
    model.to(device).eval()
    stop_ids = list(
        dict.fromkeys(_ids(model.generation_config.eos_token_id) + _ids(tokenizer.eos_token_id))
    )
    if not stop_ids:
        raise BackendError(f"the model in {path} names no end-of-sequence token")
    text_config = model.config.get_text_config()
    vocab_size = text_config.vocab_size
    info = xgr.TokenizerInfo.from_huggingface(
        tokenizer, vocab_size=vocab_size, stop_token_ids=stop_ids
    )
    pad_id = tokenizer.pad_token_id
    return Engine(
        model=model,
        tokenizer=tokenizer,
        stop_ids=stop_ids,
        pad_id=stop_ids[0] if pad_id is None else pad_id,
        vocab_size=vocab_size,
        context=getattr(text_config, "max_position_embeddings", None),
        compiler=xgr.GrammarCompiler(info),
        token_bytes=info.decoded_vocab,
        sanitize="sanitize_control_tokens"
        in inspect.signature(tokenizer.apply_chat_template).parameters,
    )


def load_engine(path: str, device: str = "auto", dtype: str = "auto") -> Engine:
    """The process's engine for this model, loaded on first use."""
    torch_device = _device(device)
    torch_dtype = _dtype(dtype, torch_device)
    key = (path, str(torch_device), str(torch_dtype))
    with _ENGINES_LOCK:
        if key not in _ENGINES:
            _ENGINES[key] = _load(path, torch_device, torch_dtype)
        return _ENGINES[key]


@dataclass
class _Row:
    """One request's decoding state inside a batch."""

    matcher: xgr.GrammarMatcher | None
    budget: int
    temperature: float
    top_p: float
    seed: int
    generator: torch.Generator | None = None
    finish: str = ""  # "stop", "length" or "rejected" once the row is over


class _Decoder(LogitsProcessor):
    """Chooses every row's next token (see the module docstring): a one-hot logits row out."""

    def __init__(self, rows: list[_Row], prompt_width: int, stop_ids: list[int], vocab: int):
        self.rows = rows
        self.prompt_width = prompt_width
        self.stop_ids = set(stop_ids)
        self.stop = stop_ids[0]
        self.bitmask = xgr.allocate_token_bitmask(len(rows), vocab)

    def accept(self, last: list[int]) -> list[int]:
        """Feed each open row the token it just got; the rows a grammar rejected come back (to
        be stopped: only a bug could bring that about, since rows only get allowed tokens)."""
        rejected = []
        for i, (row, token) in enumerate(zip(self.rows, last, strict=True)):
            if row.finish:
                continue
            if token in self.stop_ids:
                row.finish = "stop"
            elif row.matcher is not None and not row.matcher.accept_token(token):
                row.finish = "rejected"
                rejected.append(i)
        return rejected

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.Tensor:
        step = input_ids.shape[1] - self.prompt_width
        forced = self.accept(input_ids[:, -1].tolist()) if step else []
        masked, sampled = [], []
        for i, row in enumerate(self.rows):
            if row.finish:
                continue
            if step >= row.budget:
                row.finish = "length"
                forced.append(i)
                continue
            if row.matcher is not None:
                row.matcher.fill_next_token_bitmask(self.bitmask, i)
                masked.append(i)
            if row.temperature > 0:
                sampled.append(i)
        logits = scores.float()
        if masked:
            bitmask = self.bitmask.to(logits.device, non_blocking=True)
            xgr.apply_token_bitmask_inplace(logits, bitmask, indices=masked)
        chosen = logits.argmax(dim=-1)
        for i in sampled:
            chosen[i] = self._sample(self.rows[i], logits[i])
        chosen[forced] = self.stop
        onehot = torch.full_like(scores, float("-inf"))
        return onehot.scatter_(1, chosen.unsqueeze(1), 0.0)

    @staticmethod
    def _sample(row: _Row, logits: torch.Tensor) -> torch.Tensor:
        if row.generator is None:
            row.generator = torch.Generator(device=logits.device).manual_seed(row.seed)
        probs = torch.softmax(logits / row.temperature, dim=-1)
        if row.top_p >= 1:
            return torch.multinomial(probs, 1, generator=row.generator)[0]
        ordered, order = probs.sort(descending=True)
        ordered[ordered.cumsum(0) - ordered >= row.top_p] = 0  # the nucleus: the top tokens
        return order[torch.multinomial(ordered, 1, generator=row.generator)[0]]

    def close_rows(self, generated: torch.Tensor) -> None:
        """After `generate`: the last token of each row still open (generate stops without
        showing it to a processor); a row still open after it ran out of tokens."""
        self.accept(generated[:, -1].tolist())
        for row in self.rows:
            row.finish = row.finish or "length"


def grammar_text(token_bytes: list[bytes], tokens: list[int]) -> str:
    """The text of a grammar-constrained reply, from the very bytes the grammar accepted, so
    the reply is the one that was checked (the tokenizer's decode can differ).

    xgrammar (0.2.9) takes a UTF-8 encoded surrogate (ED A0..BF xx, U+D800-DFFF) as one string
    character; decoding turns its three bytes into three U+FFFD, which can push a string past
    its maxLength. Here it is one U+FFFD, the one character the grammar counted."""
    text = b"".join(token_bytes[t] for t in tokens).decode("utf-8", "surrogatepass")
    return _SURROGATE.sub("\ufffd", text)


def _problem(request: GenerationRequest) -> str:
    if request.max_tokens < 1:
        return f"max_tokens must be at least 1, not {request.max_tokens}"
    if request.temperature < 0:
        return f"temperature must be at least 0, not {request.temperature}"
    if not 0 < request.top_p <= 1:
        return f"top_p must be in (0, 1], not {request.top_p}"
    return ""


class TransformersBackend:
    """A local model run by transformers. `model` is a folder (save_pretrained layout, with
    a chat template); `device` is "auto" (CUDA when there is one), "cpu", "cuda" or "cuda:N";
    `dtype` is "auto" (float32 on the CPU, bfloat16 or float16 on a GPU), "float32",
    "bfloat16" or "float16"; `batch_size` is how many requests share one `generate` call
    (prompts of similar length are batched together)."""

    kind = "transformers"

    def __init__(
        self, model: str, device: str = "auto", dtype: str = "auto", batch_size: int = 8
    ) -> None:
        if not model:
            raise BackendError("the transformers backend needs `model`: a local model folder")
        path = Path(model).expanduser()
        if not path.is_dir():
            raise BackendError(f"model {model!r} is not a local folder (nothing is downloaded)")
        if not isinstance(batch_size, int) or batch_size < 1:
            raise BackendError(f"batch_size must be a positive integer, not {batch_size!r}")
        self.model = model
        self.batch_size = batch_size
        self.engine = load_engine(str(path.resolve()), device, dtype)

    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        results: dict[int, GenerationResult] = {}
        prompts: dict[int, list[int]] = {}
        with self.engine.lock:
            for i, request in enumerate(requests):
                try:
                    prepared = self._prepare(request)
                except Exception as error:  # a template or schema this request alone trips on
                    prepared = GenerationResult(error=f"{type(error).__name__}: {error}")
                if isinstance(prepared, GenerationResult):
                    results[i] = prepared
                else:
                    prompts[i] = prepared
            order = sorted(prompts, key=lambda i: len(prompts[i]))
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                batch = self._run([requests[i] for i in chunk], [prompts[i] for i in chunk])
                results.update(zip(chunk, batch, strict=True))
        return [results[i] for i in range(len(requests))]

    def close(self) -> None:
        """Nothing to release: the engine stays loaded for the next backend in this process."""

    def _prepare(self, request: GenerationRequest) -> list[int] | GenerationResult:
        """The request's prompt tokens (its grammar compiled), or an error result."""
        problem = _problem(request)
        if problem:
            return GenerationResult(error=problem)
        if request.json_schema is not None:
            self.engine.grammar(request.json_schema)
        prompt = self.engine.encode(request.messages)
        context = self.engine.context
        if context is not None and len(prompt) + request.max_tokens > context:
            return GenerationResult(
                prompt_tokens=len(prompt),
                error=f"the prompt ({len(prompt)} tokens) and max_tokens "
                f"({request.max_tokens}) exceed the model's context of {context} tokens",
            )
        return prompt

    def _run(
        self, requests: list[GenerationRequest], prompts: list[list[int]]
    ) -> list[GenerationResult]:
        """One `generate` call; if it fails with several requests, each is tried alone."""
        try:
            return self._generate(requests, prompts)
        except Exception as error:  # out of memory, a model that cannot run this input
            if len(requests) > 1:
                return [self._run([r], [p])[0] for r, p in zip(requests, prompts, strict=True)]
            return [GenerationResult(error=f"generation failed: {type(error).__name__}: {error}")]

    def _generate(
        self, requests: list[GenerationRequest], prompts: list[list[int]]
    ) -> list[GenerationResult]:
        engine = self.engine
        device = engine.model.device
        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), engine.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for i, prompt in enumerate(prompts):  # left padding: every row ends where decoding starts
            input_ids[i, width - len(prompt) :] = torch.tensor(prompt)
            attention[i, width - len(prompt) :] = 1
        rows = [
            _Row(
                matcher=None
                if r.json_schema is None
                else xgr.GrammarMatcher(engine.grammar(r.json_schema)),
                budget=r.max_tokens,
                temperature=r.temperature,
                top_p=r.top_p,
                seed=secrets.randbits(63) if r.seed is None else r.seed,
            )
            for r in requests
        ]
        decoder = _Decoder(rows, width, engine.stop_ids, engine.vocab_size)
        config = GenerationConfig(
            max_new_tokens=max(r.max_tokens for r in requests),
            do_sample=False,
            eos_token_id=engine.stop_ids,
            pad_token_id=engine.pad_id,
        )
        started = time.perf_counter()
        with torch.inference_mode():
            output = engine.model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention.to(device),
                generation_config=config,
                logits_processor=LogitsProcessorList([decoder]),
            )
        latency = time.perf_counter() - started
        generated = output[:, width:].cpu()
        decoder.close_rows(generated)
        return [
            self._result(row, tokens, len(prompt), latency)
            for row, tokens, prompt in zip(rows, generated.tolist(), prompts, strict=True)
        ]

    def _result(
        self, row: _Row, tokens: list[int], prompt_tokens: int, latency: float
    ) -> GenerationResult:
        stops = self.engine.stop_ids
        end = next((n for n, token in enumerate(tokens) if token in stops), len(tokens))
        content = tokens[:end]
        result = GenerationResult(
            prompt_tokens=prompt_tokens,
            completion_tokens=len(content),
            latency_s=latency,
            raw={"finish_reason": row.finish},
        )
        if row.temperature > 0:
            result.raw["seed"] = row.seed
        if row.finish == "rejected":
            result.error = "the grammar engine rejected a token it had allowed"
        elif row.matcher is not None and not (
            row.finish == "stop" or row.matcher.accept_token(stops[0])  # the JSON is complete
        ):
            result.error = CUT_ERROR.format(n=row.budget)
        elif row.matcher is not None:
            result.text = grammar_text(self.engine.token_bytes, content)
        else:
            result.text = self.engine.tokenizer.decode(
                content, skip_special_tokens=True, clean_up_tokenization_spaces=False
            )
        return result
