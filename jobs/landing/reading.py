"""Reading a split of a landing file into raw blocks: records not typed yet, their line
numbers, and the records the reader already refuses (a ragged CSV row, a JSON line that is
not an object, a key written twice, an over-long line).

Two readers give the same blocks. The columnar one reads a CSV piece whose every line is a
well-formed record with Arrow's CSV reader (``plain_csv``); it cuts any other piece's
bytes into lines and fields with Arrow, and hands Python's ``csv`` reader only the CSV
records whose quoted fields hold a comma, a quote or a line end, and ``json.loads`` only
the JSON lines Arrow's reader cannot take exactly. The row reader (``read_raw``: Python's
``csv`` and ``json`` modules) reads a file with a lone carriage return or a NUL byte,
whole. Whatever the reader, a record's values, its line number and the reason it is
refused are the same (``tests/pipeline/test_ingest_edges.py`` holds them to the
row-by-row ingest's).
"""

from __future__ import annotations

import csv
import io
import json
import re
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from isal import igzip, igzip_lib

from jobs.core.errors import UserError
from jobs.core.inputs import json_keys_twice, repeated
from jobs.landing.lines import one_value
from jobs.landing.plain_csv import line_fields, plain_body, read_plain

CHUNK = 10_000  # records of the row reader typed at a time
BLOCK_BYTES = 16 << 20  # bytes of a split the columnar reader cuts into lines at a time
MAX_RAW = 2_000  # characters of a quarantined raw record that are kept
MAX_FIELD = 65_536  # characters of one value: a longer one quarantines its row
MAX_LINE = 1 << 20  # characters of one JSON line: a longer one is quarantined unparsed
# the csv module's own limit (131,072) raised an error that failed the whole file: rows
# with longer fields are read and quarantined by MAX_FIELD instead
csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))


class IngestError(UserError, RuntimeError):
    """A landing file that cannot be read, or a batch that failed the gate; nothing of the
    source was written."""


@dataclass(frozen=True)
class Refused:
    """A raw record the reader already knows to quarantine (``reason``; ``raw``: an
    excerpt of it)."""

    reason: str
    raw: str


MISSING = object()  # a JSON record without the key


@dataclass
class RawBlock:
    """Records of one split, not typed yet. ``lines``: each record's line number;
    ``columns``: per column its raw values (an Arrow string array, or a Python list of
    parsed JSON values, ``MISSING`` where a record lacks the key; None: no record has the
    column); ``raw(i)``: the record's text as the quarantine keeps it; ``refused``:
    (line, reason, raw) of the records refused unread."""

    lines: np.ndarray
    columns: dict[str, pa.Array | list | None]
    raw: Callable[[int], str]
    refused: list[tuple[int, str, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.lines)


def excerpt(text: str, limit: int = 80) -> str:
    """At most ``limit`` characters of a raw text, escaped (``repr``): what an error
    message may quote of a file."""
    return repr(text[:limit]) + (f" (… {len(text):,} characters)" if len(text) > limit else "")


def raw_text(raw) -> str:
    """A raw record as the quarantine keeps it: JSON of a record, at most ``MAX_RAW``
    characters and its length."""
    text = raw if isinstance(raw, str) else json.dumps(raw, default=str)
    return text if len(text) <= MAX_RAW else text[:MAX_RAW] + f"... ({len(text):,} characters)"


# what reading a raw file's bytes may raise for a file that is not what its name says
# (a gzip file cut short or corrupt, bytes that are not UTF-8): ``unreadable`` names it
NOT_READ = (OSError, EOFError, UnicodeDecodeError, zlib.error, igzip_lib.IsalError)


def open_raw(path: Path):
    """A landing file's bytes, a ``.gz`` file's decompressed as they are read (by
    ISA-L's igzip: the format and the errors of Python's ``gzip``, 4x its speed)."""
    return igzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def _open_text(path: Path):
    raw = open_raw(path)
    # utf-8-sig: a byte-order mark is not part of the first column's name
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")


def csv_header(path: Path, time_column: str | None) -> list[str]:
    """The CSV header's column names (stripped); raises ``IngestError`` for a name given
    twice and for a header without ``time_column``. An empty file has none ([])."""
    with _open_text(path) as f:
        header = next(csv.reader(f), None)
    if header is None:
        return []
    names = [name.strip() for name in header]
    twice = repeated(names)
    if twice:
        raise IngestError(f"{path}: the header names column(s) "
                          f"{', '.join(excerpt(n, 40) for n in twice[:5])} more "
                          "than once: which value is meant cannot be known")
    if time_column is not None and time_column not in names:
        raise IngestError(f"{path}: no column {time_column!r} in the header "
                          f"(it begins {excerpt(','.join(names))})")
    return names


def read_raw(path: Path, fmt: str, time_column: str | None = None
             ) -> Iterator[tuple[int, dict | str | Refused]]:
    """(line or row number, record) pairs of a whole file, streamed by Python's readers; a
    record that is not an object stays a string (it goes to quarantine). Raises
    ``IngestError`` for a file that cannot be read (also midway: the caller writes nothing
    of it), and for a CSV header without ``time_column``."""
    try:
        if fmt == "csv":
            names = csv_header(path, time_column)
            if not names:
                return
            with _open_text(path) as f:
                reader = csv.reader(f)
                next(reader)
                for fields in reader:
                    if not fields:
                        continue  # a blank line
                    if len(fields) != len(names):  # a field missing or one too many
                        yield reader.line_num, Refused(ragged(len(fields), len(names)),
                                                       json.dumps(fields)[:MAX_RAW])
                        continue
                    yield reader.line_num, dict(zip(names, fields))
            return
        if fmt == "jsonl":
            with _open_text(path) as f:
                for n, line in enumerate(f, start=1):
                    if not line.strip() and len(line) <= MAX_LINE:
                        continue
                    yield n, json_record(line)
            return
        n = 0
        for batch in parquet_batches(path):
            for r in batch.to_pylist():
                n += 1
                yield n, r
    except (OSError, EOFError, UnicodeDecodeError, csv.Error, pa.ArrowInvalid) as exc:
        raise unreadable(path, fmt, exc) from None


def unreadable(path, fmt: str, exc: BaseException) -> IngestError:
    return IngestError(f"{path}: cannot be read as {fmt}: {str(exc)[:200]}")


def parquet_batches(path: Path, row_groups: list[int] | None = None):
    """A Parquet file's record batches (``row_groups``: only those); raises for a file
    naming a column twice."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    names = parquet.schema_arrow.names
    twice = repeated(names)
    if twice:
        raise IngestError(f"{path}: the file names column(s) "
                          f"{', '.join(excerpt(c, 40) for c in twice[:5])} more than "
                          "once: which value is meant cannot be known")
    yield from parquet.iter_batches(batch_size=CHUNK, row_groups=row_groups)


def ragged(fields: int, names: int) -> str:
    return (f"{fields} field(s) where the header names {names}: which value belongs to "
            "which column cannot be known")


def json_record(line: str) -> dict | str | Refused:
    """One JSONL line (with its line end) as a record, a string (not an object: malformed)
    or ``Refused`` (over-long, a key written twice)."""
    if len(line) > MAX_LINE:
        return Refused(f"a line of {len(line):,} characters, over the limit of {MAX_LINE:,}",
                       line[:MAX_RAW])
    try:
        rec = json.loads(line)
    except (json.JSONDecodeError, RecursionError):
        return line.rstrip("\r\n")
    if not isinstance(rec, dict):
        return line.rstrip("\r\n")
    key = _written_twice(line, rec)
    if key is not None:
        return Refused(f"key {excerpt(key, 40)} appears twice in the record: which value is "
                       "meant cannot be known", line.rstrip("\r\n")[:MAX_RAW])
    return rec


_KEY = re.compile(r'"\s*:')  # the end of a JSON key (or, rarely, of a string value)


def _written_twice(line: str, rec: dict) -> str | None:
    """A key the JSON object on ``line`` writes twice (``json.loads`` keeps the last value
    without a word), or None. Only a line with more key ends than ``rec`` has keys (nested
    objects, or text that looks like a key end) is parsed again, key by key."""
    if len(_KEY.findall(line)) <= len(rec):
        return None
    _, doubled = json_keys_twice(line)
    return doubled[0] if doubled else None


# -- blocks ------------------------------------------------------------------------------

def block_of_records(records, columns: list[str]) -> RawBlock:
    """A raw block of (line, record) pairs from ``read_raw``."""
    lines, recs, refused = [], [], []
    for line, rec in records:
        if isinstance(rec, Refused):
            refused.append((line, rec.reason, rec.raw))
        elif not isinstance(rec, dict):
            refused.append((line, "not a record with named fields (malformed line)",
                            raw_text(rec)))
        else:
            lines.append(line)
            recs.append(rec)
    values = {c: [r.get(c, MISSING) for r in recs] for c in columns}
    return RawBlock(np.array(lines, np.int64), values, lambda i: raw_text(recs[i]), refused)


def row_blocks(path: Path, fmt: str, time_column: str, columns: list[str]
               ) -> Iterator[RawBlock]:
    """The whole file through the row reader, ``CHUNK`` records a block."""
    chunk = []
    for item in read_raw(path, fmt, time_column):
        chunk.append(item)
        if len(chunk) >= CHUNK:
            yield block_of_records(chunk, columns)
            chunk = []
    if chunk:
        yield block_of_records(chunk, columns)


class NotPlain(Exception):
    """A compressed file holds a lone carriage return or a NUL byte: Python's readers
    read it (the columnar reader stops at the first piece that shows one)."""


def _plain(piece: bytes, path: Path) -> None:
    if b"\x00" in piece or (b"\r" in piece and piece.count(b"\r") != piece.count(b"\r\n")):
        raise NotPlain(str(path))


def line_ends(piece: bytes) -> int:
    """How many line ends (``\\n``) ``piece`` holds (numpy: a seventh of ``bytes.count``'s
    time)."""
    return int(np.count_nonzero(np.frombuffer(piece, np.uint8) == 10))


def byte_blocks(path: Path, start: int, end: int, count: bool = True
                ) -> Iterator[tuple[bytes, int]]:
    """The bytes [start, end) of a file in pieces of about ``BLOCK_BYTES`` that end at a
    line end (the last piece: at ``end``), with the number of line ends before each (0
    without ``count``); a byte-order mark at the file's start is left out, as
    ``utf-8-sig`` leaves it. A gzip file: all its bytes, decompressed as they are read,
    ``NotPlain`` raised at a piece with a lone carriage return or a NUL byte. A file
    shorter than ``end`` (changed since it was listed) raises ``OSError``."""
    gz = path.name.endswith(".gz")
    left = None if gz else end - start  # bytes still to read (None: to the end)
    newlines, rest, first = 0, b"", True
    with open_raw(path) as f:
        f.seek(start)
        while left is None or left > 0:
            chunk = f.read(BLOCK_BYTES if left is None else min(BLOCK_BYTES, left))
            if not chunk:
                if left is None:
                    break
                raise OSError(f"the file ends {left:,} bytes before byte {end:,}, where it "
                              "ended when it was listed: it changed while being ingested")
            if left is not None:
                left -= len(chunk)
            if first and start == 0 and chunk.startswith(_BOM):
                chunk = chunk[len(_BOM):]
            first = False
            data = rest + chunk
            cut = len(data) if left == 0 else data.rfind(b"\n") + 1
            if cut == 0:
                rest = data
                continue
            piece, rest = data[:cut], data[cut:]
            if gz:
                _plain(piece, path)
            yield piece, newlines
            if count:
                newlines += line_ends(piece)
    if rest:
        if gz:
            _plain(rest + b"\n", path)
        yield rest, newlines


_BOM = b"\xef\xbb\xbf"


def split_lines(piece: bytes, path: Path, fmt: str) -> pa.Array:
    """A piece's lines (without their line ends) as an Arrow string array; raises
    ``IngestError`` for bytes that are not UTF-8."""
    try:
        text = one_value(piece).cast(pa.string())
    except pa.ArrowInvalid:
        try:
            piece.decode("utf-8")  # Python's own words for what is wrong, as the row reader's
        except UnicodeDecodeError as exc:
            raise unreadable(path, fmt, exc) from None
        raise
    lines = pc.list_flatten(pc.split_pattern(text, "\n"))
    if piece.endswith(b"\n"):
        lines = lines.slice(0, len(lines) - 1)
    if fmt == "csv" and b"\r" in piece:
        lines = pc.replace_substring_regex(lines, "\r$", "")
    return lines


class _Lines:
    """Lines for one record of Python's ``csv`` reader, from line ``j`` on; ``over``: the
    record wanted a line after the last (a quoted field still open)."""

    def __init__(self, text, count: int, j: int):
        self.text, self.count, self.j, self.over = text, count, j, False

    def __iter__(self):
        return self

    def __next__(self) -> str:
        if self.j >= self.count:
            self.over = True
            raise StopIteration
        self.j += 1
        return self.text(self.j - 1)


class QuoteOpen(Exception):
    """A split ended inside a quoted field: its cut was not at a record's end."""


def csv_blocks(path: Path, start: int, end: int, first_line: int, names: list[str],
               columns: list[str], last_split: bool = True) -> Iterator[RawBlock]:
    """A CSV split read on columns (``names``: the file's header; ``start`` 0: the split
    holds the header line itself). A piece (``BLOCK_BYTES``) whose every line is a
    well-formed record of its own (``plain_csv``) is read by Arrow's CSV reader whole.
    In any other piece, a line without a quote character, or whose quoted fields hold no
    quote, is a record of its own, cut into fields by Arrow (split on commas, or by
    ``_fields`` when a quoted field holds a comma); any other record that begins on a line
    with one is read by Python's ``csv`` reader, which takes as many lines as its quoted
    fields hold. Raises ``QuoteOpen`` when the split (not the file's last) ends inside a
    quoted field."""
    width = len(names)
    index = {n: i for i, n in enumerate(names)}
    wanted = [c for c in columns if c in index]
    carry, base = b"", first_line
    pieces = list_pieces(path, start, end)
    for piece, last in pieces:
        data = carry + piece
        header = start == 0 and base == 0
        block = _plain_block(data, header, base, names, columns, wanted)
        if block is not None:  # every line a well-formed record: Arrow's CSV reader
            base += len(block) + header
            carry = b""
            yield block
            continue
        lines = split_lines(data, path, "csv")
        count = len(lines)
        quoted = np.asarray(pc.match_substring(lines, '"').to_numpy(zero_copy_only=False), bool)
        simple = quoted & np.asarray(pc.match_substring_regex(lines, _SIMPLE).fill_null(False)
                                     .to_numpy(zero_copy_only=False), bool)
        quoted &= ~simple  # a record of its own, its quoted fields without , or "
        commas = np.zeros(count, bool)  # one too, its quoted fields without ": cut by Arrow
        cut_fields = None  # their fields (``_fields``), in line order
        if quoted.any():
            at = np.flatnonzero(quoted)
            extracted = pc.extract_regex(lines.take(pa.array(at, pa.int64())), _fields(width))
            matched = ~np.asarray(extracted.is_null().to_numpy(zero_copy_only=False), bool)
            commas[at[matched]] = True
            cut_fields = extracted.filter(pa.array(matched))
            quoted &= ~commas
        taken = np.zeros(count, bool)  # lines read by Python's reader
        if header:
            taken[0] = True
        records: list[tuple[int, list[str]]] = []
        stop = count
        if quoted.any():
            ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)

            def text(j: int, data=data, ends=ends) -> str:
                lo = int(ends[j - 1]) + 1 if j else 0
                hi = int(ends[j]) + 1 if j < len(ends) else len(data)
                return data[lo:hi].decode("utf-8")

            for i in np.flatnonzero(quoted):
                i = int(i)
                if taken[i]:
                    continue
                it = _Lines(text, count, i)
                fields = next(csv.reader(it), None)
                if it.over and not last:  # the record goes on in the next piece
                    stop = i
                    break
                if it.over and not last_split:
                    raise QuoteOpen(f"{path}: a quoted field is open at byte {end:,}")
                taken[i:it.j] = True
                if fields:
                    records.append((base + it.j, fields))
        if stop < count:
            lo = int(ends[stop - 1]) + 1 if stop else 0
            carry, data_lines = data[lo:], stop
            lines, taken = lines.slice(0, stop), taken[:stop]
        else:
            carry, data_lines = b"", count
        numbers = np.arange(len(lines), dtype=np.int64) + base + 1
        keep = ~taken & np.asarray(pc.not_equal(pc.utf8_length(lines), 0).to_numpy(
            zero_copy_only=False), bool)
        base += data_lines
        commas = commas[:len(keep)]
        split, cut = keep & ~commas, keep & commas
        if cut_fields is not None:  # those of the lines kept (not carried, not read by Python)
            cut_fields = cut_fields.slice(0, int(commas.sum())).filter(pa.array(cut[commas]))
        yield _csv_block(lines.filter(pa.array(split)), numbers[split], records, names, width,
                         index, columns, bool(simple[:len(keep)][split].any()),
                         cut_fields, numbers[cut])


def _plain_block(data: bytes, header: bool, base: int, names: list[str],
                 columns: list[str], wanted: list[str]) -> RawBlock | None:
    """The records of a piece whose every line is a well-formed record (``plain_csv``),
    read by Arrow's CSV reader; None for any other piece."""
    body = plain_body(data, header)
    values = read_plain(body, names, wanted) if body is not None else None
    if values is None:
        return None
    fields = line_fields(body)

    def raw(i: int) -> str:
        return raw_text(dict(zip(names, fields(i))))

    rows = len(next(iter(values.values())))
    numbers = np.arange(rows, dtype=np.int64) + base + 1 + header
    return RawBlock(numbers, {c: values.get(c) for c in columns}, raw)


def list_pieces(path: Path, start: int, end: int) -> Iterator[tuple[bytes, bool]]:
    """``byte_blocks`` with a flag on the last piece."""
    previous = None
    for piece, _ in byte_blocks(path, start, end, count=False):
        if previous is not None:
            yield previous, False
        previous = piece
    if previous is not None:
        yield previous, True


# a CSV line whose fields are each plain (no quote, no comma) or quoted without a quote or
# a comma inside: Python's reader takes each quoted field's inside, so Arrow can cut it
_SIMPLE = r'^(?:"[^",]*"|[^",]*)(?:,(?:"[^",]*"|[^",]*))*$'


def _fields(width: int) -> str:
    """A CSV line of ``width`` fields, each quoted without a quote inside (commas allowed)
    or plain without a quote or a comma, each field a named group (``f0``, ``f1``, …):
    Python's reader takes each quoted field's inside and each plain one as it is."""
    return "^" + ",".join(f'(?P<f{k}>"[^"]*"|[^",]*)' for k in range(width)) + "$"


def _inside(arr: pa.Array) -> pa.Array:
    """Fields as Python's reader gives them: a quoted one's inside."""
    return pc.if_else(pc.starts_with(arr, '"'), pc.utf8_slice_codeunits(arr, 1, -1), arr)


def _unquoted(parts: list[str]) -> list[str]:
    return [p[1:-1] if p.startswith('"') else p for p in parts]


def _csv_block(lines: pa.Array, numbers: np.ndarray, records: list, names: list[str],
               width: int, index: dict, columns: list[str], quotes: bool = False,
               cut: pa.StructArray | None = None, cut_numbers: np.ndarray | None = None
               ) -> RawBlock:
    """A raw block of lines cut on columns (``quotes``: some fields are quoted, without a
    quote or a comma inside), lines already cut by ``_fields`` (``cut``: quoted fields with
    commas inside) and records Python's reader read."""
    fields = pc.split_pattern(lines, ",")
    counts = pc.list_value_length(fields).to_numpy(zero_copy_only=False)
    bad = counts != width
    refused = []
    if bad.any():
        for i in np.flatnonzero(bad):
            parts = _unquoted(fields[int(i)].as_py())
            refused.append((int(numbers[i]), ragged(len(parts), width),
                            json.dumps(parts)[:MAX_RAW]))
        fields, numbers = fields.filter(pa.array(~bad)), numbers[~bad]
    whole = []
    for line, parts in records:
        if len(parts) != width:
            refused.append((line, ragged(len(parts), width), json.dumps(parts)[:MAX_RAW]))
        else:
            whole.append((line, parts))
    split_rows = len(fields)
    cut_rows = 0 if cut is None else len(cut)
    values = {}
    for c in columns:
        if c not in index:
            values[c] = None
            continue
        arr = pc.list_element(fields, index[c]) if split_rows else pa.array([], pa.string())
        if quotes and split_rows:
            arr = _inside(arr)
        if cut_rows:
            arr = pa.concat_arrays([arr, _inside(cut.field(f"f{index[c]}"))])
        if whole:
            arr = pa.concat_arrays([arr, pa.array([p[index[c]] for _, p in whole],
                                                  pa.string())])
        values[c] = arr
    numbers = np.concatenate([numbers, cut_numbers if cut_rows else np.zeros(0, np.int64),
                              np.array([n for n, _ in whole], np.int64)])

    def raw(i: int) -> str:
        if i < split_rows:
            parts = _unquoted(fields[i].as_py())
        elif i < split_rows + cut_rows:
            parts = _unquoted([cut.field(f"f{k}")[i - split_rows].as_py() for k in range(width)])
        else:
            parts = whole[i - split_rows - cut_rows][1]
        return raw_text(dict(zip(names, parts)))

    return RawBlock(numbers, values, raw, refused)


# the characters str.strip() removes: a value (or a JSON line) of only these is empty
SPACE = "".join(c for c in map(chr, range(0x3001)) if c.isspace())
EMPTY = "^[" + "".join(f"\\x{{{ord(c):x}}}" for c in SPACE) + "]*$"


def value_bytes(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(the bytes of a string array's values one after another, each value's start in
    them and, last, their end)."""
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], np.int32, n + 1, arr.offset * 4)
    lo, hi = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(arr.buffers()[2], np.uint8, hi - lo, lo) if hi > lo else \
        np.zeros(0, np.uint8)
    return data, (offsets - lo).astype(np.int64)


# the first bytes a text of only white space (``EMPTY``) can begin with: ASCII white
# space, and any byte of a character beyond ASCII
_MAY_BE_SPACE = np.zeros(256, bool)
_MAY_BE_SPACE[[ord(c) for c in SPACE if ord(c) < 0x80]] = True
_MAY_BE_SPACE[0x80:] = True


def only_space(arr: pa.Array) -> np.ndarray:
    """Per value of a string array: not null, and empty or only white space (``EMPTY``).
    The regular expression runs only on the values that are empty or begin with a byte
    such a value can begin with (a value that begins with a letter is not blank)."""
    data, starts = value_bytes(arr)
    lengths = np.diff(starts)
    first = np.zeros(len(arr), np.uint8)
    some = np.flatnonzero(lengths > 0)
    first[some] = data[starts[some]]
    maybe = (lengths == 0) | _MAY_BE_SPACE[first]
    if arr.null_count:
        maybe &= np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool)
    out = np.zeros(len(arr), bool)
    at = np.flatnonzero(maybe)
    if len(at):
        blank = pc.match_substring_regex(arr.take(pa.array(at, pa.int64())), EMPTY)
        out[at] = np.asarray(blank.to_numpy(zero_copy_only=False), bool)
    return out
