"""Length of an exported row: tokens of a named local tokenizer, else characters.

The length counts the text a model would train on or read (message contents and tool call
names and arguments), without a chat template, so it is the same for every kind.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from curation.exports.spec import FilterError


@lru_cache(maxsize=2)
def load_tokenizer(name: str) -> Any:
    """A tokenizer from a local folder or the local Hugging Face cache; never downloads."""
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise FilterError("tokenizer", "counting tokens needs transformers installed") from exc
    try:
        return AutoTokenizer.from_pretrained(name, local_files_only=True)
    except (OSError, ValueError) as exc:
        raise FilterError("tokenizer", f"no tokenizer {name!r} available locally") from exc


def _texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)
    elif isinstance(value, dict):
        if "role" in value:  # a message
            yield from _texts(value.get("content") or "")
            for call in value.get("tool_calls") or []:
                yield call["function"]["name"]
                yield call["function"]["arguments"]


def text_of(values: list[Any]) -> str:
    return "\n".join(_texts(values))


def length(values: list[Any], tokenizer_name: str) -> int:
    text = text_of(values)
    if not tokenizer_name:
        return len(text)
    return len(load_tokenizer(tokenizer_name)(text, add_special_tokens=False)["input_ids"])
