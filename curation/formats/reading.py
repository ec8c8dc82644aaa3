"""Reading raw records from files and streams without holding a whole file in memory.

JSON Lines are read line by line; a top-level JSON array is read item by item (ijson); a file
holding one JSON document (a Who&When log, a pretty-printed record) is one record. Every item
says where it came from (file and line or item number) so errors can point at it.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import ijson
import orjson

SUFFIXES = (".json", ".jsonl", ".ndjson")


@dataclass
class RawItem:
    source: str
    location: str  # "line 12", "item 3", or "" for a file that is one record
    obj: Any = None
    error: str = ""  # set when the raw text is not a JSON value

    @property
    def where(self) -> str:
        return f"{self.source}, {self.location}" if self.location else self.source


def _natural_key(path: Path) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def is_data_file(path: Path) -> bool:
    name = path.name.removesuffix(".gz")
    return name.endswith(SUFFIXES)


def expand_paths(paths: Iterable[str | Path]) -> tuple[list[Path], list[str]]:
    """Files to read (folders searched recursively, in natural order) and paths that are missing."""
    files: list[Path] = []
    missing: list[str] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(
                sorted(
                    (p for p in path.rglob("*") if p.is_file() and is_data_file(p)),
                    key=_natural_key,
                )
            )
        elif path.is_file():
            files.append(path)
        else:
            missing.append(str(raw))
    return files, missing


def decompressed(path: Path, raw: IO[bytes]) -> IO[bytes]:
    """The file's bytes, gunzipped on the fly for .gz files."""
    return gzip.GzipFile(fileobj=raw, mode="rb") if path.suffix == ".gz" else raw


def _decode(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not valid UTF-8 (byte {exc.start} of the line)") from exc


def _parse_line(line: bytes) -> Any:
    # orjson is strict JSON: it refuses NaN and unpaired surrogates that no database stores.
    return orjson.loads(_decode(line))


def iter_stream(stream: IO[bytes], source: str) -> Iterator[RawItem]:
    """Raw records of one binary stream, whatever its layout (JSONL, JSON array, one document)."""
    reader = buffered(stream)
    if reader.peek(3).startswith(b"\xef\xbb\xbf"):
        reader.read(3)  # a UTF-8 byte order mark
    if reader.peek(4096).lstrip().startswith(b"["):
        yield from _iter_array(reader, source)
    else:
        yield from _iter_lines(reader, source)


def _iter_array(stream: IO[bytes], source: str) -> Iterator[RawItem]:
    count = 0  # items read so far: the broken one, if any, is the next
    try:
        for obj in ijson.items(_SurrogateGuard(stream), "item", use_float=True):
            yield RawItem(source, f"item {count}", obj)
            count += 1
    except UnpairedSurrogate as exc:
        yield RawItem(source, f"item {count}", error=f"reading stopped: {exc}")
    except (ijson.JSONError, UnicodeDecodeError) as exc:
        # An array cannot be resynchronised after broken JSON: the items before it still land.
        yield RawItem(source, f"item {count}", error=f"invalid JSON, reading stopped: {exc}")


def _iter_lines(stream: IO[bytes], source: str) -> Iterator[RawItem]:
    lines = iter(stream)
    first = True
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield RawItem(source, f"line {number}", _parse_line(line))
        except ValueError as exc:
            if first:
                # Perhaps one pretty-printed JSON document rather than JSON Lines.
                yield from _iter_document(line + b"".join(lines), source, number)
                return
            yield RawItem(source, f"line {number}", error=f"invalid JSON: {exc}")
        first = False


def _iter_document(text: bytes, source: str, first_line: int) -> Iterator[RawItem]:
    try:
        obj = orjson.loads(_decode(text))
    except ValueError as exc:
        lines = text.splitlines()
        if not any(_parses(line) for line in lines[1:]):
            # One broken document (nothing after its first line is a record): one error, at
            # the line where the document breaks.
            yield _document_error(text, exc, source, first_line)
            return
        # Neither one document nor clean JSON Lines: report every line that is broken.
        for number, line in enumerate(lines, first_line):
            if not line.strip():
                continue
            try:
                yield RawItem(source, f"line {number}", _parse_line(line))
            except ValueError as exc:
                yield RawItem(source, f"line {number}", error=f"invalid JSON: {exc}")
        return
    if isinstance(obj, list):
        for index, item in enumerate(obj):
            yield RawItem(source, f"item {index}", item)
    else:
        yield RawItem(source, "", obj)


def _parses(line: bytes) -> bool:
    try:
        return isinstance(_parse_line(line), dict)
    except ValueError:
        return False


def _document_error(text: bytes, exc: ValueError, source: str, first_line: int) -> RawItem:
    if isinstance(exc, json.JSONDecodeError):
        line = first_line + exc.lineno - 1
        error = f"invalid JSON: {exc.msg} (line {line} column {exc.colno})"
    else:  # not UTF-8
        start = getattr(exc.__cause__, "start", 0)
        line = first_line + text.count(b"\n", 0, start)
        error = "invalid JSON: not valid UTF-8"
    return RawItem(source, f"line {line}", error=error)


class UnpairedSurrogate(ValueError):
    pass


# A \uXXXX escape of a UTF-16 surrogate, after an even run of backslashes (an odd run makes
# it literal text): a high one with its low partner (fine), or either one alone.
_SURROGATE_ESCAPE = re.compile(
    rb"(?<!\\)(?:\\\\)*\\u(?:[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|([dD][89a-fA-F][0-9a-fA-F]{2}))"
)
_SURROGATE_START = re.compile(rb"\\u[dD][89a-fA-F]")
_ESCAPE_TAIL = 12  # bytes held back so that an escape pair is never split between reads


class _SurrogateGuard:
    """ijson's C backend reads an unpaired surrogate escape (`"\\ud83d"`) as "?" without a
    word, so the bytes are checked on the way in: what comes before such an escape is passed
    on, and the next read raises UnpairedSurrogate. Reading stops there, as it does at any
    broken JSON in an array, with the items before it parsed."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.pending = b""  # read but not yet passed on
        self.error = ""
        self.done = False

    def read(self, size: int = 65536) -> bytes:
        if size == 0:  # ijson's probe for bytes or text
            return b""
        while not self.error:
            cut = self._checked_up_to(size)
            if cut or self.done or self.error:
                break
            self._fill(size)  # everything was held back: read on
        else:
            raise UnpairedSurrogate(self.error)
        passed, self.pending = self.pending[:cut], self.pending[cut:]
        if not passed and self.error:
            raise UnpairedSurrogate(self.error)
        return passed

    def _fill(self, size: int) -> None:
        chunk = self.stream.read(max(size, _ESCAPE_TAIL + 1))
        self.done = not chunk
        self.pending += chunk

    def _checked_up_to(self, size: int) -> int:
        """How much of `pending` can be passed on; sets `error` at an unpaired surrogate."""
        while not self.done and len(self.pending) <= _ESCAPE_TAIL:
            self._fill(size)
        data = self.pending
        cut = len(data) if self.done else len(data) - _ESCAPE_TAIL
        while cut and data[cut - 1 : cut] == b"\\":
            cut -= 1  # never cut after a backslash: the next look-behind must see it
        if not _SURROGATE_START.search(data):  # the common case: no surrogate escapes at all
            return cut
        for match in _SURROGATE_ESCAPE.finditer(data):
            if match.start() >= cut:
                break
            if match.group(1):
                self.error = (
                    f"an unpaired UTF-16 surrogate escape (\\u{match.group(1).decode()}) "
                    "cannot be stored"
                )
                return match.start()
            cut = max(cut, match.end())  # a pair is passed on whole
        return cut


class _ReadAdapter(io.RawIOBase):
    """Lets io.BufferedReader wrap anything with read(n), such as a Django request."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def buffered(stream: Any) -> io.BufferedReader:
    if isinstance(stream, io.BufferedReader):
        return stream
    if isinstance(stream, io.RawIOBase):
        return io.BufferedReader(stream)
    return io.BufferedReader(_ReadAdapter(stream))
