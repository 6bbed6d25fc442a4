"""A JSONL piece whose every line is a plain object of the source's columns in one order
(``jsonlines.whole_piece``: one regular expression over the piece) is parsed by Arrow's
JSON reader whole. Its typed events, quarantined rows and ids equal those of the reading
line by line (itself held to the row reader by ``test_ingest_edges``), on random values:
texts with escapes, quotes and digits, numbers of any length, booleans and nulls, nested
values, keys in another order, blank lines and CRLF line ends."""

import json

import pyarrow as pa
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from jobs.config.sources import Source
from jobs.landing import jsonlines
from jobs.landing.files import typed_file

SOURCE = Source(name="toy", columns={"pid": "string", "ts": "timestamp", "dose": "double",
                                     "n": "integer", "note": "string"}, id_column=None,
                landing="toy", format="jsonl")
texts = st.text(st.sampled_from('ab"\\/\x01 é\u2028\U0001F600,:{}0123456789'), max_size=20)
values = {
    "pid": st.one_of(texts, st.integers(), st.none()),
    "ts": st.one_of(st.sampled_from(["2024-01-02", "2024-01-02T03:04:05Z", "x", ""]),
                    st.integers(0, 2**62), st.none()),
    "dose": st.one_of(st.floats(allow_nan=False), st.integers(-2**70, 2**70), texts,
                      st.booleans(), st.none()),
    "n": st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=False), st.none()),
    "note": st.one_of(texts, st.none(), st.lists(st.integers(), max_size=2)),
}
records = st.fixed_dictionaries(values)


def _line(record: dict, order: list[str], spaced: bool, ascii_only: bool) -> str:
    pairs = [(k, record[k]) for k in order]
    separators = (", ", ": ") if spaced else (",", ":")
    return json.dumps(dict(pairs), separators=separators, ensure_ascii=ascii_only)


def _typed(path, monkeypatch, whole: bool):
    if not whole:
        monkeypatch.setattr(jsonlines, "whole_piece", lambda piece, kinds: None)
    events, quarantine = typed_file(SOURCE, path)
    monkeypatch.undo()
    cols = [c for c in events.column_names if c not in ("ingested_at", "ingest_run")]
    return events.select(cols).to_pylist(), [(q["line"], q["reason"], q["raw"])
                                             for q in quarantine]


@settings(deadline=None, max_examples=120)
@given(rows=st.lists(records, min_size=1, max_size=12), reorder=st.booleans(),
       spaced=st.booleans(), ascii_only=st.booleans(), crlf=st.booleans(),
       final=st.booleans())
def test_a_plain_piece_read_whole_equals_it_read_line_by_line(
        tmp_path_factory, rows, reorder, spaced, ascii_only, crlf, final):
    order = list(values)
    lines = [_line(r, order[::-1] if reorder and i % 3 == 2 else order, spaced, ascii_only)
             for i, r in enumerate(rows)]
    end = "\r\n" if crlf else "\n"
    path = tmp_path_factory.mktemp("jsonl") / "f.jsonl"
    path.write_text(end.join(lines) + (end if final else ""), encoding="utf-8", newline="")
    with pytest.MonkeyPatch.context() as mp:
        assert _typed(path, mp, True) == _typed(path, mp, False)


# values Arrow's reader takes for each column's kind (it refuses a piece otherwise)
taken = st.fixed_dictionaries({
    "pid": st.one_of(texts, st.none()),
    "ts": st.one_of(st.sampled_from(["2024-01-02", "2024-01-02T03:04:05Z", "x", ""]), st.none()),
    "dose": st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.none(),
                      st.integers(-10**14, 10**14)),
    "n": st.one_of(st.integers(-10**14, 10**14), st.none()),
    "note": st.one_of(texts, st.none())})


@settings(deadline=None, max_examples=60)
@given(rows=st.lists(taken, min_size=1, max_size=8))
def test_plain_pieces_go_to_arrow_whole(tmp_path_factory, rows):
    """Lines of one key order with plain values (no nested value, no number of 16 digits
    or more, no escaped surrogate: characters beyond the BMP written as they are) are read
    without cutting the piece into lines."""
    for r in rows:
        assume(r["dose"] is None or len(repr(r["dose"]).replace("-", "")) < 16)
    path = tmp_path_factory.mktemp("jsonl") / "f.jsonl"
    path.write_text("".join(json.dumps({k: r[k] for k in values}, ensure_ascii=False) + "\n"
                            for r in rows),
                    encoding="utf-8")
    cut = []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jsonlines, "split_lines", lambda *a: cut.append(a) or pa.array([]))
        typed_file(SOURCE, path)
    assert not cut


def test_pieces_that_are_not_plain_are_read_line_by_line(tmp_path):
    """A blank line, a key written twice, a nested value, a 16-digit number or an escaped
    surrogate anywhere in a piece: the piece is cut into lines."""
    good = '{"pid": "a", "ts": "2024-01-02", "dose": 1.5, "n": 2, "note": "x"}'
    for bad in ["", '{"pid": "a", "pid": "b", "ts": "2024-01-02", "dose": 1, "n": 2, "note": 1}',
                '{"pid": "a", "ts": "2024-01-02", "dose": 1, "n": 2, "note": [1]}',
                '{"pid": "a", "ts": "2024-01-02", "dose": 1234567890123456, "n": 2, "note": ""}',
                '{"pid": "\\ud800", "ts": "2024-01-02", "dose": 1, "n": 2, "note": ""}']:
        data = (good + "\n" + bad + "\n" + good + "\n").encode()
        assert jsonlines.whole_piece(data, dict(SOURCE.columns)) is None, bad
    assert jsonlines.whole_piece(((good + "\n") * 3).encode(), dict(SOURCE.columns)) is not None
