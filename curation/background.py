"""Running an iterator in a thread a bounded number of items ahead of its consumer.

The importer parses in Python while it writes to the database; psycopg releases the GIL while
it waits on the server, so a parsing thread keeps the CPU busy during every COPY and commit.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")
_END = object()


class _Raised:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


def in_background(iterable: Iterable[T], ahead: int, name: str = "background") -> Iterator[T]:
    """Yield what `iterable` yields, produced in a thread at most `ahead` items early.

    An exception in the thread is raised here; when the consumer stops early, the thread
    stops at its next item. The thread must not use the database: Django connections are
    per thread, and it would not see the consumer's transaction.
    """
    items: queue.Queue = queue.Queue(maxsize=max(ahead, 1))
    stop = threading.Event()

    def put(value: object) -> bool:
        while not stop.is_set():
            try:
                items.put(value, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for value in iterable:
                if not put(value):
                    return
        except BaseException as exc:  # handed to the consumer, which raises it
            put(_Raised(exc))
            return
        put(_END)

    thread = threading.Thread(target=produce, name=name, daemon=True)
    thread.start()
    try:
        while (value := items.get()) is not _END:
            if isinstance(value, _Raised):
                raise value.exc
            yield value
    finally:
        stop.set()
        thread.join(timeout=10)
