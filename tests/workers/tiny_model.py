"""A tiny randomly initialised chat model, saved like a real one, for tests and benches of the
local backends. Nothing is downloaded: the byte-level BPE tokenizer is trained here on a few
lines of judge-like JSON, so every byte (hence every JSON character) has a token and the common
keys get merged tokens, as with a real tokenizer.

The shape suits vLLM too (Llama architecture, head_dim 64, fast tokenizer with a chat
template). Random weights make the model pick among the tokens a grammar allows all but at
random, which is what the grammar tests want.
"""

from __future__ import annotations

from pathlib import Path

SPECIAL_TOKENS = ["<|pad|>", "<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "<|tool|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}<|end|>"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
VOCAB_SIZE = 512
_CORPUS = [
    '{"verdict": "failure", "first_critical_step": 3, "root_cause_step": 2, '
    '"error_category": "tool_misuse", "responsible_agent": "assistant", '
    '"rationale": "The agent called the wrong tool and never checked the result.", '
    '"confidence": 80, "steps": [{"step": 0, "label": "progress", "score": 5}]}',
    '{"decisive": true, "rationale": "Step 4 ignores the error the tool returned."}',
    '{"half": "second", "rationale": "The first half reads the files correctly."}',
    '{"steps": [{"step": 1, "label": "exploration", "score": 0}, '
    '{"step": 2, "label": "no_progress", "score": -3}, '
    '{"step": 3, "label": "regression", "score": -10}]}',
    "You judge agent trajectories. The user asked for the weather in Paris; the assistant "
    "searched, read the page and answered with the temperature.",
]


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(_CORPUS * 4, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|end|>",
        pad_token="<|pad|>",
        additional_special_tokens=SPECIAL_TOKENS[2:],
        chat_template=CHAT_TEMPLATE,
    )


def build_tiny_model(folder: Path) -> Path:
    """Write the tokenizer and a ~0.4M-parameter Llama (seeded, so the same every time) into
    `folder` with save_pretrained; return the folder, to pass as the backend's `model`."""
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer()
    eos, pad = tokenizer.convert_tokens_to_ids(["<|end|>", "<|pad|>"])
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=8192,
        bos_token_id=eos,
        eos_token_id=eos,
        pad_token_id=pad,
        tie_word_embeddings=True,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=eos, pad_token_id=pad)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
