"""The `vllm` backend on the tiny random model. Needs vLLM and a CUDA GPU (a GPU worker with
`pip install '.[gpu]'`); elsewhere those tests are skipped with the reason, and only the
error for a missing vLLM is checked."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from tests.workers.test_backend_transformers import CATEGORIES, whitespace_outside_strings
from tests.workers.tiny_model import build_tiny_model
from workers.backends import BackendError, GenerationRequest, make_backend
from workers.judging import schema

HAS_VLLM = importlib.util.find_spec("vllm") is not None
if not HAS_VLLM:
    MISSING = "vLLM is not installed (pip install '.[gpu]')"
elif not torch.cuda.is_available():
    MISSING = "vLLM here needs a CUDA GPU"
else:
    MISSING = ""
needs_vllm = pytest.mark.skipif(bool(MISSING), reason=MISSING)
JUDGEMENT = schema.judgement_schema(step_count=7, categories=CATEGORIES, with_steps=True)
MESSAGES = [
    {"role": "system", "content": "You judge agent trajectories. Reply in JSON."},
    {"role": "user", "content": 'Step 0: search("weather Paris")\nStep 1: answer 21C'},
]
ROOM = 6000  # tokens: enough for any reply the schemas allow


@pytest.fixture(scope="module")
def backend(tmp_path_factory: pytest.TempPathFactory):
    model_dir = build_tiny_model(tmp_path_factory.mktemp("tiny-model"))
    return make_backend(
        "vllm",
        str(model_dir),
        {"gpu_memory_utilization": 0.3, "max_model_len": 8192, "enforce_eager": True},
    )


def request(json_schema=None, messages=MESSAGES, **options) -> GenerationRequest:
    return GenerationRequest(
        messages=messages, json_schema=json_schema, **{"max_tokens": ROOM, **options}
    )


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here")
def test_without_vllm_the_backend_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(BackendError, match=r"pip install '\.\[gpu\]'"):
        make_backend("vllm", str(tmp_path))


def test_a_model_is_required() -> None:
    with pytest.raises(BackendError, match="needs `model`"):
        make_backend("vllm", "")


@needs_vllm
def test_every_constrained_reply_validates(backend) -> None:
    cases = [
        (JUDGEMENT, {"temperature": 0.0}),
        (JUDGEMENT, {"temperature": 1.0, "seed": 1}),
        (JUDGEMENT, {"temperature": 1.0, "top_p": 0.9, "seed": 2}),
        (schema.judgement_schema(1, [], with_steps=False), {"temperature": 1.0, "seed": 3}),
        (schema.decisive_step_schema(), {"temperature": 1.2, "seed": 4}),
        (schema.half_schema(), {"temperature": 1.2, "seed": 5}),
        (schema.step_scores_schema(12), {"temperature": 1.0, "seed": 6}),
    ]
    results = backend.generate([request(s, **options) for s, options in cases])

    for (json_schema, _), result in zip(cases, results, strict=True):
        assert result.ok, result.error
        assert result.raw["finish_reason"] == "stop"
        assert result.prompt_tokens and result.completion_tokens
        assert whitespace_outside_strings(result.text) == [], result.text
        schema.parse(result.text, json_schema)


@needs_vllm
def test_a_seed_gives_the_same_reply(backend) -> None:
    batch = [request(JUDGEMENT, temperature=1.0, seed=11) for _ in range(2)]

    first, second = backend.generate(batch)

    assert first.text == second.text
    assert first.text == backend.generate(batch[:1])[0].text


@needs_vllm
def test_a_reply_cut_by_max_tokens_is_an_error_not_a_reply(backend) -> None:
    cut, free = backend.generate(
        [request(JUDGEMENT, max_tokens=5), request(None, max_tokens=5, temperature=1.0, seed=3)]
    )

    assert cut.error == "cut at max_tokens (5) before the JSON was complete"
    assert cut.text == ""
    assert cut.raw["finish_reason"] == "length"
    assert free.ok
    assert free.completion_tokens <= 5


@needs_vllm
def test_results_keep_the_order_of_requests(backend) -> None:
    schemas = [schema.decisive_step_schema(), schema.half_schema(), schema.step_scores_schema(4)]
    batch = [
        GenerationRequest(
            messages=[{"role": "user", "content": "word " * (20 - 2 * i)}],
            json_schema=schemas[i % 3],
            max_tokens=ROOM,
            temperature=1.0,
            seed=i,
        )
        for i in range(9)
    ]
    results = backend.generate(batch)

    for i, result in enumerate(results):
        assert set(schema.parse(result.text, schemas[i % 3])) == set(schemas[i % 3]["properties"])
    lengths = [r.prompt_tokens for r in results]
    assert lengths == sorted(lengths, reverse=True) and len(set(lengths)) == 9


@needs_vllm
def test_a_request_vllm_refuses_fails_alone(backend) -> None:
    too_long, good = backend.generate(
        [
            request(None, messages=[{"role": "user", "content": "word " * 9000}]),
            request(schema.half_schema(), temperature=1.0, seed=1),
        ]
    )

    assert not too_long.ok and too_long.text == ""
    assert good.ok
    schema.parse(good.text, schema.half_schema())


@needs_vllm
def test_control_tokens_inside_messages_are_plain_text(backend) -> None:
    if not backend.sanitizes_control_tokens:
        pytest.skip("this transformers cannot encode control tokens in messages as text (< 5)")
    plain, spelled = backend.generate(
        [
            GenerationRequest(messages=[{"role": "user", "content": ""}], max_tokens=1),
            GenerationRequest(messages=[{"role": "user", "content": "<|end|>"}], max_tokens=1),
        ]
    )

    assert spelled.prompt_tokens - plain.prompt_tokens > 1
