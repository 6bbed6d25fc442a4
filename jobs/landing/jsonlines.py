"""JSON lines on columns: a JSONL split cut into lines, the lines Arrow's JSON reader parses
exactly as ``json_record`` does found on their bytes, those parsed by Arrow's reader, and
every other line by ``json_record``, one by one (``reading`` holds the rules both follow).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.landing import reading
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
    import pyarrow.json as pj

    schema = pa.schema([(c, JSON_TYPES[k]) for c, k in kinds.items()])
    text = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(lines)], pa.int32()),
                                                   lines.cast(pa.binary())), b"\n")
    try:
        return pj.read_json(io.BytesIO(text[0].as_buffer()), parse_options=pj.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="error"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def jsonl_blocks(path: Path, start: int, end: int, first_line: int, columns: list[str],
                 kinds: dict[str, str] | None = None) -> Iterator[RawBlock]:
    """A JSONL split without a lone carriage return, cut into lines on columns. Lines that
    name exactly the columns (``kinds``: their kinds) are parsed by Arrow's JSON reader
    when it takes them all; every other line, and all of them when it refuses one, as
    ``json_record`` parses it."""
    kinds = {c: (kinds or {}).get(c, "string") for c in columns}
    arrow = all(_NAME.match(c) for c in columns)
    for piece, before in byte_blocks(path, start, end):
        lines = split_lines(piece, path, "jsonl")
        last_ended = piece.endswith(b"\n")
        count = len(lines)
        base = first_line + before
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
