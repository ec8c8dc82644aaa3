"""The `transformers` backend on a tiny random model (CPU, seconds). A random model picks among
the tokens the grammar allows all but at random, so every reply must still validate against its
schema: bounds on integers, lengths of strings, no free whitespace, raw control characters."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import xgrammar as xgr

from tests.workers.tiny_model import build_tiny_model
from workers.backends import BackendError, GenerationRequest, make_backend
from workers.backends.transformers_local import TransformersBackend, grammar_text, load_engine
from workers.judging import schema

CATEGORIES = ["tool_misuse", "hallucination", "gave_up"]
JUDGEMENT = schema.judgement_schema(step_count=7, categories=CATEGORIES, with_steps=True)
MESSAGES = [
    {"role": "system", "content": "You judge agent trajectories. Reply in JSON."},
    {"role": "user", "content": 'Step 0: search("weather Paris")\nStep 1: answer 21C'},
]
ROOM = 6000  # tokens: a string of 1000 characters of up to 4 bytes each never runs out


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """A tiny model gains nothing from threads, and on busy shared CPUs they slow it down."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="module")
def backend(model_dir: Path) -> TransformersBackend:
    return TransformersBackend(str(model_dir), device="cpu", batch_size=4)


def request(json_schema=None, **options) -> GenerationRequest:
    return GenerationRequest(
        messages=MESSAGES, json_schema=json_schema, **{"max_tokens": ROOM, **options}
    )


def whitespace_outside_strings(text: str) -> list[int]:
    """Offsets of whitespace between JSON tokens, other than the one space that follows a
    `,` or `:` (the separators the grammar writes)."""
    found, in_string, escaped = [], False, False
    for n, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char.isspace() and not (char == " " and n and text[n - 1] in ",:"):
            found.append(n)
    return found


def test_every_constrained_reply_validates(backend: TransformersBackend) -> None:
    cases = [
        (JUDGEMENT, {"temperature": 0.0}),
        (JUDGEMENT, {"temperature": 1.0, "seed": 1}),
        (JUDGEMENT, {"temperature": 1.5, "seed": 2}),
        (JUDGEMENT, {"temperature": 1.0, "top_p": 0.9, "seed": 3}),
        (schema.judgement_schema(1, [], with_steps=False), {"temperature": 1.0, "seed": 4}),
        (schema.decisive_step_schema(), {"temperature": 1.2, "seed": 5}),
        (schema.half_schema(), {"temperature": 1.2, "seed": 6}),
        (schema.step_scores_schema(12), {"temperature": 1.0, "seed": 7}),
        (schema.step_scores_schema(3), {"temperature": 0.0}),
    ]
    results = backend.generate([request(s, **options) for s, options in cases])

    for (json_schema, _), result in zip(cases, results, strict=True):
        assert result.ok, result.error
        assert result.raw["finish_reason"] == "stop"
        assert result.prompt_tokens and result.completion_tokens
        assert result.latency_s > 0
        assert whitespace_outside_strings(result.text) == [], result.text
        reply = schema.parse(result.text, json_schema)  # validates, control characters and all
        for step in reply.get("steps", []):
            assert -10 <= step["score"] <= 10
    # the grammar lets raw control characters into bounded strings; parse strips them
    assert any(schema.CONTROL.search(r.text) for r in results)
    judgement = schema.parse(results[1].text, JUDGEMENT)
    assert judgement["verdict"] in schema.VERDICTS
    assert judgement["error_category"] in [*CATEGORIES, ""]
    assert len(judgement["rationale"]) <= schema.RATIONALE_MAX
    assert len(judgement["steps"]) <= 7
    assert all(0 <= s["step"] <= 6 for s in judgement["steps"])
    assert schema.parse(results[4].text, cases[4][0])["root_cause_step"] in (0, None)


def test_a_seed_gives_the_same_reply_whatever_shares_its_batch(
    backend: TransformersBackend,
) -> None:
    batch = [request(JUDGEMENT, temperature=1.0, seed=seed) for seed in (11, 11, 12)]
    first = [r.text for r in backend.generate(batch)]
    crowded = backend.generate(
        [
            GenerationRequest(messages=[{"role": "user", "content": "x" * 300}], seed=1),
            batch[0],
            request(schema.half_schema(), temperature=0.7, seed=2),
        ]
    )

    assert first[0] == first[1] != first[2]
    assert crowded[1].text == first[0]


def test_a_reply_cut_by_max_tokens_is_an_error_not_a_reply(backend: TransformersBackend) -> None:
    cut, free = backend.generate(
        [request(JUDGEMENT, max_tokens=5), request(None, max_tokens=5, temperature=1.0, seed=3)]
    )

    assert not cut.ok
    assert cut.error == "cut at max_tokens (5) before the JSON was complete"
    assert cut.text == ""
    assert cut.completion_tokens == 5
    assert free.ok  # a plain reply may be cut: it is returned as it is, with the reason
    assert free.completion_tokens <= 5
    assert free.raw["finish_reason"] in ("stop", "length")


def test_unconstrained_request(backend: TransformersBackend) -> None:
    (result,) = backend.generate([request(None, max_tokens=40, temperature=0.0)])

    assert result.ok
    assert isinstance(result.text, str)
    assert result.prompt_tokens > 10
    assert 1 <= result.completion_tokens <= 40


def test_results_keep_the_order_of_requests(backend: TransformersBackend) -> None:
    """More requests than batch_size, prompts of different lengths (batches are formed by
    length) and schemas that do not accept each other's replies."""
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

    assert len(results) == 9
    for i, result in enumerate(results):
        reply = schema.parse(result.text, schemas[i % 3])
        assert set(reply) == set(schemas[i % 3]["properties"])
    lengths = [r.prompt_tokens for r in results]
    assert lengths == sorted(lengths, reverse=True) and len(set(lengths)) == 9


def test_a_bad_request_fails_alone(backend: TransformersBackend) -> None:
    bad_top_p, too_long, good = backend.generate(
        [
            request(JUDGEMENT, top_p=0.0),
            request(JUDGEMENT, max_tokens=9000),
            request(schema.half_schema(), temperature=1.0, seed=1),
        ]
    )

    assert bad_top_p.error == "top_p must be in (0, 1], not 0.0"
    assert "exceed the model's context of 8192 tokens" in too_long.error
    assert good.ok
    schema.parse(good.text, schema.half_schema())


def test_control_tokens_inside_messages_are_plain_text(backend: TransformersBackend) -> None:
    """Trajectory text that spells the end-of-turn token must not end the turn."""
    plain, spelled = backend.generate(
        [
            GenerationRequest(messages=[{"role": "user", "content": ""}], max_tokens=1),
            GenerationRequest(messages=[{"role": "user", "content": "<|end|>"}], max_tokens=1),
        ]
    )

    assert spelled.prompt_tokens - plain.prompt_tokens > 1  # several text tokens, not one


def test_grammar_text_counts_an_encoded_surrogate_as_the_grammar_does(model_dir: Path) -> None:
    """xgrammar accepts ED A0 80 (U+D800 encoded) as one character of a string; the reply's
    text must hold one character for it, or a string at its maxLength would be too long."""
    loaded = load_engine(str(model_dir.resolve()), "cpu")
    short = {
        "type": "object",
        "properties": {"r": {"type": "string", "maxLength": 3}},
        "required": ["r"],
        "additionalProperties": False,
    }
    reply = b'{"r": "ab\xed\xa0\x80"}'
    tokens = [loaded.token_bytes.index(bytes([byte])) for byte in reply]
    matcher = xgr.GrammarMatcher(loaded.grammar(short))
    assert all(matcher.accept_token(t) for t in tokens + loaded.stop_ids[:1])

    assert schema.parse(grammar_text(loaded.token_bytes, tokens), short) == {"r": "ab\ufffd"}


def test_settings_are_checked(model_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(BackendError, match="not a local folder"):
        TransformersBackend(str(tmp_path / "absent"))
    with pytest.raises(BackendError, match="unknown dtype"):
        TransformersBackend(str(model_dir), dtype="int3")
    with pytest.raises(BackendError, match="batch_size"):
        TransformersBackend(str(model_dir), batch_size=0)
    with pytest.raises(BackendError, match="cannot load"):
        TransformersBackend(str(tmp_path))

    built = make_backend("transformers", str(model_dir), {"device": "cpu", "batch_size": 2})
    assert built.kind == "transformers"
    assert built.batch_size == 2
