"""Reading raw records: JSON Lines, JSON arrays, single documents, gzip; every item says where."""

from __future__ import annotations

import gzip
import io
import json

import pytest

from curation.formats.reading import decompressed, expand_paths, iter_stream

RECORD = {"steps": [{"role": "user", "content": "hi"}]}


class Trickle(io.RawIOBase):
    """A stream handing out `size` bytes per read, so escapes fall across every boundary."""

    def __init__(self, data: bytes, size: int) -> None:
        self.data, self.size, self.at = data, size, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        chunk = self.data[self.at : self.at + min(len(buffer), self.size)]
        buffer[: len(chunk)] = chunk
        self.at += len(chunk)
        return len(chunk)


def items_of(data: bytes, source: str = "runs.jsonl") -> list:
    return list(iter_stream(io.BytesIO(data), source))


def test_it_reads_json_lines_line_by_line_and_skips_blank_lines():
    data = b"\n".join([json.dumps({"n": 1}).encode(), b"", b"   ", json.dumps({"n": 2}).encode()])
    items = items_of(data)
    assert [(i.location, i.obj) for i in items] == [("line 1", {"n": 1}), ("line 4", {"n": 2})]
    assert items[1].where == "runs.jsonl, line 4"


def test_it_reads_a_json_array_item_by_item():
    data = json.dumps([{"n": 0}, {"n": 1}, {"n": 2}], indent=2).encode()
    items = items_of(b"  \n" + data, "runs.json")
    assert [(i.location, i.obj) for i in items] == [
        ("item 0", {"n": 0}),
        ("item 1", {"n": 1}),
        ("item 2", {"n": 2}),
    ]


def test_it_reads_a_pretty_printed_document_as_one_record():
    data = json.dumps({"history": [], "question": "q"}, indent=4).encode()
    (item,) = items_of(data, "logs/3.json")
    assert item.obj == {"history": [], "question": "q"}
    assert item.location == "" and item.where == "logs/3.json"
    assert not item.error


def test_it_skips_a_utf8_byte_order_mark():
    items = items_of(b"\xef\xbb\xbf" + json.dumps([RECORD]).encode(), "bom.json")
    assert [i.obj for i in items] == [RECORD]
    items = items_of(b"\xef\xbb\xbf" + json.dumps(RECORD).encode() + b"\n")
    assert [i.obj for i in items] == [RECORD]


def test_it_reads_gzipped_files(tmp_path):
    path = tmp_path / "runs.jsonl.gz"
    with gzip.open(path, "wb") as out:
        out.write(b"\n".join(json.dumps({"n": n}).encode() for n in range(3)))
    with open(path, "rb") as raw:
        items = list(iter_stream(decompressed(path, raw), str(path)))
    assert [i.obj for i in items] == [{"n": 0}, {"n": 1}, {"n": 2}]


def test_it_reads_streams_that_only_have_read():
    class Upload:
        def __init__(self, data: bytes) -> None:
            self.data = Trickle(data, 7)  # short reads, like a network stream

        def read(self, size: int = -1) -> bytes:
            return self.data.read(size)

    data = json.dumps([{"n": n} for n in range(50)]).encode()
    items = list(iter_stream(Upload(data), "upload"))
    assert [i.obj["n"] for i in items] == list(range(50))


def test_it_reports_broken_json_by_line_and_keeps_reading():
    data = b'{"n": 1}\n{"n": \n{"n": 3}\n'
    items = items_of(data)
    assert [i.location for i in items] == ["line 1", "line 2", "line 3"]
    assert items[1].error.startswith("invalid JSON")
    assert [i.obj for i in items if not i.error] == [{"n": 1}, {"n": 3}]


def test_a_broken_first_line_is_reported_by_line_too():
    data = b'{"n": \n{"n": 2}\n\n{"n": 4}\n'
    items = items_of(data)
    assert [(i.location, bool(i.error)) for i in items] == [
        ("line 1", True),
        ("line 2", False),
        ("line 4", False),
    ]


def test_a_broken_pretty_printed_document_is_one_error_at_the_line_it_breaks():
    data = b'\n{\n  "question": "q",\n  "history": [\n    {"role": "human"\n  ]\n}\n'
    (item,) = items_of(data, "logs/7.json")
    assert item.location == "line 6"
    assert item.error.startswith("invalid JSON:") and "line 6" in item.error
    assert item.where == "logs/7.json, line 6"


def test_a_pretty_printed_document_with_invalid_utf8_is_one_error():
    data = b'{\n  "question": "q",\n  "history": ["caf\xe9"]\n}\n'
    (item,) = items_of(data, "logs/8.json")
    assert (item.location, item.error) == ("line 3", "invalid JSON: not valid UTF-8")


def test_it_reports_invalid_utf8_by_line():
    data = b'{"n": 1}\n{"n": "\xff\xfe"}\n{"n": 3}\n'
    items = items_of(data)
    assert items[1].location == "line 2"
    assert "UTF-8" in items[1].error
    assert [i.obj for i in items if not i.error] == [{"n": 1}, {"n": 3}]


def test_a_broken_array_stops_at_the_broken_item_and_keeps_the_ones_before():
    data = b'[{"n": 0}, {"n": 1}, {"n": oops}, {"n": 3}]'
    items = items_of(data, "runs.json")
    assert [i.obj for i in items if not i.error] == [{"n": 0}, {"n": 1}]
    assert items[-1].location == "item 2"
    assert "invalid JSON" in items[-1].error


def test_a_broken_first_array_item_is_item_zero():
    items = items_of(b'[{"n": oops}, {"n": 1}]', "runs.json")
    assert [(i.location, bool(i.error)) for i in items] == [("item 0", True)]


def test_a_truncated_array_keeps_the_items_before():
    items = items_of(b'[{"n": 0}, {"n": 1}, {"n": 2', "runs.json")
    assert [i.obj for i in items if not i.error] == [{"n": 0}, {"n": 1}]
    assert items[-1].location == "item 2" and items[-1].error


TRICKY_TEXT = ["pair \U0001f600", "\\ud83d literal", "a\\\\\u00e9", "\\" * 7, "x\\y"]


@pytest.mark.parametrize("size", [1, 2, 5, 7, 13, 4096])
def test_escapes_in_an_array_survive_any_read_boundary(size: int) -> None:
    records = [{"text": TRICKY_TEXT[n % 5] * (n + 1)} for n in range(25)]
    data = json.dumps(records).encode()  # ASCII: the emoji as a surrogate pair escape
    items = list(iter_stream(Trickle(data, size), "runs.json"))
    assert [item.obj for item in items] == records


@pytest.mark.parametrize("escape", ["\\ud83d", "\\udc00", "\\ud83d\\u0041"])
@pytest.mark.parametrize("size", [1, 3, 4096])
def test_an_unpaired_surrogate_escape_stops_an_array_where_it_is(escape: str, size: int) -> None:
    data = f'[{{"n": 0}}, {{"text": "half {escape} here"}}, {{"n": 2}}]'.encode()
    items = list(iter_stream(Trickle(data, size), "runs.json"))
    assert [item.obj for item in items[:1]] == [{"n": 0}]
    assert items[1].location == "item 1"
    assert "unpaired UTF-16 surrogate escape" in items[1].error
    assert len(items) == 2


def test_expand_paths_walks_folders_in_natural_order_and_lists_missing_paths(tmp_path):
    folder = tmp_path / "logs"
    (folder / "sub").mkdir(parents=True)
    for name in ("10.json", "2.json", "1.json", "sub/3.jsonl.gz", "notes.txt", "x.ndjson"):
        (folder / name).write_bytes(b"{}")
    single = tmp_path / "single.data"
    single.write_bytes(b"{}")
    files, missing = expand_paths([folder, single, tmp_path / "nope.jsonl"])
    names = [str(p.relative_to(tmp_path)) for p in files]
    assert names == [
        "logs/1.json",
        "logs/2.json",
        "logs/10.json",
        "logs/sub/3.jsonl.gz",
        "logs/x.ndjson",
        "single.data",  # a file named explicitly is read whatever its suffix
    ]
    assert missing == [str(tmp_path / "nope.jsonl")]
