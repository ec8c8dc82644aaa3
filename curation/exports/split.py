"""The train/test split: by task, from a hash of the task id, so every row of a task lands on
the same side, and the same task always lands on the same side for the same seed."""

from __future__ import annotations

import hashlib

SPLITS = ("train", "test")


def split_of(task: str, test_fraction: float, seed: str = "") -> str:
    if test_fraction <= 0:
        return "train"
    digest = hashlib.sha256(f"{seed}\0{task}".encode()).digest()
    return "test" if int.from_bytes(digest[:8], "big") / 2**64 < test_fraction else "train"
