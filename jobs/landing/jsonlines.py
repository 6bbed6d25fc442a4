"""JSON lines on columns. A piece of a JSONL split whose every line is a plain object of
the columns in one key order (``whole_piece``: one regular expression over the piece) is
parsed by Arrow's JSON reader whole. Any other piece is cut into lines: the lines Arrow's
JSON reader parses exactly as ``json_record`` does are found on their bytes and parsed by
Arrow's reader, every other line by ``json_record``, one by one (``reading`` holds the
rules both follow).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.landing import reading
from jobs.landing.lines import line_at, one_value
from jobs.landing.reading import (
    RawBlock,
    block_of_records,
    byte_blocks,
    json_record,
    only_space,
    raw_text,
    split_lines,
    value_bytes,
)

JSON_TYPES = {"string": pa.string(), "integer": pa.int64(), "double": pa.float64(),
              "number": pa.float64(), "timestamp": pa.string()}
_NAME = re.compile(r"^[A-Za-z0-9_ .-]+$")  # a column name Arrow's reader is given
_SPACE_BYTES = np.zeros(256, bool)  # RE2's ``\s``: what may stand between a key and its colon
_SPACE_BYTES[[0x09, 0x0A, 0x0C, 0x0D, 0x20]] = True
_HEX_HIGH = np.zeros(256, bool)  # the third hex digit of an escaped surrogate (``\uD8..``)
_HEX_HIGH[list(b"89abcdefABCDEF")] = True


def plain_json(lines: pa.Array, kinds: dict[str, str]) -> np.ndarray:
    """The JSON lines Arrow's reader parses exactly as ``json_record`` does (given it
    parses them at all): each names every column once and nothing else (as many keys,
    ``"\\s*:``, as names, and each name's key there), within the line limit, without a
    number of 16 digits or more (Python keeps those as integers) or an escaped surrogate
    (Python keeps a lone one). Found on the lines' bytes at once, not line by line: the
    quotes, the first byte after each that is not white space, the digit runs and the
    backslashes, each placed in its line by its position."""
    n = len(lines)
    ok = np.asarray(pc.less(pc.binary_length(lines), reading.MAX_LINE).to_numpy(
        zero_copy_only=False), bool)
    if n == 0:
        return ok
    data, starts = value_bytes(lines)
    ends = starts[1:]

    def line_of(pos: np.ndarray) -> np.ndarray:
        return np.searchsorted(ends, pos, side="right")

    quotes = np.flatnonzero(data == 0x22)
    boundary = np.zeros(len(data) + 1, bool)  # where a line ends (and the next begins)
    boundary[ends] = True
    padded = np.append(data, np.uint8(0))  # the byte after the last quote: none
    # a key ends at a quote whose next byte other than white space, in its line, is ":"
    nxt = quotes + 1
    inside = ~boundary[nxt]
    after = padded[nxt]
    space = np.flatnonzero(inside & _SPACE_BYTES[after])
    while len(space):  # white space after a quote: rare, and short
        nxt[space] += 1
        inside[space] = ~boundary[nxt[space]]
        after[space] = padded[nxt[space]]
        space = space[inside[space] & _SPACE_BYTES[after[space]]]
    key_at = np.flatnonzero(inside & (after == 0x3A))
    close = quotes[key_at]
    k_line = line_of(close)
    ok &= np.bincount(k_line, minlength=n) == len(kinds)
    # a name's key: the quote before a key's end quote, in its line, just before the name;
    # the keys of each name's length compared with it as rows of bytes
    prior = np.where(key_at > 0, quotes[np.maximum(key_at - 1, 0)], -1)
    width = np.where(prior >= starts[k_line], close - prior - 1, -1)
    by_width: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for name in kinds:
        word = np.frombuffer(name.encode(), np.uint8)
        if len(word) not in by_width:
            at = np.flatnonzero(width == len(word))
            by_width[len(word)] = at, data[close[at][:, None] - len(word) + np.arange(len(word))]
        at, text = by_width[len(word)]
        written = np.zeros(n, bool)
        written[k_line[at[(text == word).all(axis=1)]]] = True
        ok &= written
    # 16 digits in a row, or an escaped surrogate: the regular expression runs only on the
    # lines with a backslash or with 8 digits in a row at a multiple of 8 bytes (a run of
    # 16 holds one)
    words = np.frombuffer(data, np.uint64, len(data) // 8) if len(data) >= 8 else \
        np.zeros(0, np.uint64)
    high = np.uint64(0xF0F0F0F0F0F0F0F0)
    threes = np.uint64(0x3030303030303030)
    digits = ((words & high) == threes) & (((words + np.uint64(0x0606060606060606)) & high)
                                             == threes)
    odd = np.union1d(line_of(np.flatnonzero(digits) * 8), line_of(np.flatnonzero(data == 0x5C)))
    if len(odd):
        found = pc.match_substring_regex(lines.take(pa.array(odd, pa.int64())),
                                         r"[0-9]{16}|\\u[dD][89a-fA-F]")
        ok[odd[np.asarray(found.to_numpy(zero_copy_only=False), bool)]] = False
    return ok


def arrow_json(lines: pa.Array, kinds: dict[str, str]) -> pa.Table | None:
    """Lines parsed by Arrow's JSON reader with the columns' JSON types, or None when it
    refuses any of them (Python's reader then reads them one by one)."""
    text = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(lines)], pa.int32()),
                                                   lines.cast(pa.binary())), b"\n")
    return _read_json(text[0].as_buffer(), kinds)


def _read_json(data, kinds: dict[str, str]) -> pa.Table | None:
    import pyarrow.json as pj

    schema = pa.schema([(c, JSON_TYPES[k]) for c, k in kinds.items()])
    try:
        return pj.read_json(pa.BufferReader(data), parse_options=pj.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="error"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


# a piece every line of which is one object that names the columns in one order, each
# value a string (no control character, no escaped surrogate), a number of at most 15
# digits in a row, true, false or null: one regular expression (RE2: linear) over the piece
_WS = r"[ \t]*"
_STRING = (r'"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]'
           r'|\\u(?:[0-9a-cA-Ce-fE-F][0-9a-fA-F]{3}|[dD][0-7][0-9a-fA-F]{2}))*"')
_NUMBER = r"-?(?:0|[1-9][0-9]{0,14})(?:\.[0-9]{1,15})?(?:[eE][+-]?[0-9]{1,15})?"
_VALUE = f"(?:{_STRING}|{_NUMBER}|true|false|null)"


@functools.lru_cache(maxsize=64)
def piece_pattern(order: tuple[str, ...]) -> str:
    """The regular expression of a piece of lines that each name the columns ``order``, in
    that order, once (``_NAME``s: written as they are)."""
    keys = ["".join(c if c.isalnum() or c == "_" else f"[{c}]" for c in k) for k in order]
    pairs = ",".join(f'{_WS}"{k}"{_WS}:{_WS}{_VALUE}{_WS}' for k in keys)
    line = f"{_WS}\\{{{pairs}\\}}{_WS}"
    return rf"\A(?:{line}\r?\n)*(?:{line}\r?)?\z"


def whole_piece(piece: bytes, kinds: dict[str, str]) -> pa.Table | None:
    """A piece's lines parsed by Arrow's JSON reader at once when every one is a plain
    object (``piece_pattern``, in the first line's order of keys) shorter than the line
    limit: Arrow's values are then those ``json_record`` gives. None for any other piece
    (and for one Arrow refuses)."""
    first = piece.find(b"\n")
    try:
        head = json.loads(piece[:first if first >= 0 else len(piece)])
    except ValueError:
        return None
    if not isinstance(head, dict) or sorted(head) != sorted(kinds):
        return None
    half = reading.MAX_LINE // 2  # a line of MAX_LINE bytes holds an aligned half without \n
    if any(piece.find(b"\n", k, k + half) < 0 for k in range(0, len(piece) - half + 1, half)):
        return None
    try:
        text = one_value(piece).cast(pa.string())
    except pa.ArrowInvalid:
        return None  # not UTF-8: the line reader names the error
    if not pc.match_substring_regex(text, piece_pattern(tuple(head)))[0].as_py():
        return None
    return _read_json(piece, kinds)


def jsonl_blocks(path: Path, start: int, end: int, first_line: int, columns: list[str],
                 kinds: dict[str, str] | None = None) -> Iterator[RawBlock]:
    """A JSONL split without a lone carriage return, on columns. A piece whose every line
    is a plain object of the columns (``whole_piece``) is parsed by Arrow's JSON reader
    whole; any other piece is cut into lines: those that name exactly the columns
    (``kinds``: their kinds) are parsed by Arrow's JSON reader when it takes them all;
    every other line, and all of them when it refuses one, as ``json_record`` parses it."""
    kinds = {c: (kinds or {}).get(c, "string") for c in columns}
    arrow = all(_NAME.match(c) for c in columns)
    for piece, before in byte_blocks(path, start, end):
        base = first_line + before
        table = whole_piece(piece, kinds) if arrow and piece else None
        if table is not None:
            text = line_at(piece)
            yield RawBlock(np.arange(1, table.num_rows + 1, dtype=np.int64) + base,
                           {c: table.column(c).combine_chunks() for c in columns},
                           lambda i, text=text: raw_text(json.loads(text(i))))
            continue
        lines = split_lines(piece, path, "jsonl")
        last_ended = piece.endswith(b"\n")
        count = len(lines)
        numbers = np.arange(1, count + 1, dtype=np.int64) + base
        blank = only_space(lines)
        at = np.flatnonzero(blank)  # a blank line too long is refused as over-long
        if len(at):
            chars = pc.utf8_length(lines.take(pa.array(at, pa.int64())))
            blank[at] = np.asarray(chars.to_numpy(zero_copy_only=False)) < reading.MAX_LINE - 1
        fast = ~blank & plain_json(lines, kinds) if arrow else np.zeros(count, bool)
        if fast.any():
            chosen = lines.filter(pa.array(fast))
            table = arrow_json(chosen, kinds)
            if table is None:
                fast[:] = False
            else:
                def raw(i: int, chosen=chosen) -> str:
                    return raw_text(json.loads(chosen[i].as_py()))

                yield RawBlock(numbers[fast], {c: table.column(c).combine_chunks()
                                               for c in columns}, raw)
        slow = np.flatnonzero(~blank & ~fast)
        if len(slow):
            records = []
            for i in slow:
                text = lines[int(i)].as_py()
                line = text + ("\n" if int(i) < count - 1 or last_ended else "")
                if not line.strip() and len(line) <= reading.MAX_LINE:
                    continue  # blank
                records.append((int(numbers[i]), json_record(line)))
            yield block_of_records(records, columns)
