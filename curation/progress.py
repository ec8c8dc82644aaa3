"""A one-line progress display for terminals (nothing is drawn when output is not a TTY)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressLine:
    def __init__(self, total_bytes: int, stream: TextIO = sys.stderr, every: float = 0.2) -> None:
        self.total = max(total_bytes, 1)
        self.stream = stream
        self.enabled = stream.isatty()
        self.every = every
        self.last = 0.0
        self.started = time.monotonic()

    def update(self, done_bytes: int, created: int, failed: int, force: bool = False) -> None:
        now = time.monotonic()
        if not self.enabled or (not force and now - self.last < self.every):
            return
        self.last = now
        fraction = min(done_bytes / self.total, 1.0)
        bar = "#" * int(fraction * 30)
        rate = created / max(now - self.started, 1e-6)
        self.stream.write(
            f"\r[{bar:<30}] {fraction:4.0%}  {created} imported, {failed} failed, {rate:,.0f}/s"
        )
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
