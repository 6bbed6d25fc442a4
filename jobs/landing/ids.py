"""Event ids. A source with an id column gives its own; otherwise an event's id is a
content hash, ``<digest>-<n>``: the first 20 hex digits of the SHA-256 of the JSON list
``[source, value, …]`` of the row's typed values (``json.dumps``: text escaped as ASCII,
numbers as Python writes them, times as nanoseconds), and ``n`` the row's occurrence among
identical rows of its whole file, in line order, however the file is split. These are the
ids every lake already holds; ``tests/pipeline/test_ingest_ids.py`` keeps them.

Here the JSON text is built on columns in one join (text without a character to escape,
integers and times by Arrow; numbers as ``repr`` of each distinct value), the digests per
row by ``hashlib``, and the ids' texts in one buffer.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.landing.reading import value_bytes

_PLAIN = r"^[\x20\x21\x23-\x5b\x5d-\x7e]*$"  # text that JSON writes as it is
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)
MIX = 1_000_003  # the id key of a content-hash id: content key * MIX + its number (wraps)


def _per_distinct(arr: pa.Array, fn) -> pa.Array:
    """``fn`` of each value of ``arr`` (not null), computed once per distinct value."""
    uniq = pc.unique(arr.drop_null())
    mapped = pa.array([fn(v) for v in uniq.to_pylist()], pa.string())
    return mapped.take(pc.index_in(arr, uniq))


def _plain_bytes(data: np.ndarray) -> bool:
    """Whether every byte is one of ``_PLAIN``'s (printable ASCII but ``"`` and ``\\``):
    four vectorised passes, a tenth of the time of a table look-up per byte."""
    return bool(data.min() >= 0x20 and data.max() <= 0x7E and not (data == 0x22).any()
                and not (data == 0x5C).any())


def _all_plain(arr: pa.Array) -> bool:
    """Whether every value of a string array is text JSON writes as it is: one look at
    the bytes of its values (no regular expression per value)."""
    chunks = arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]
    for chunk in chunks:
        if len(chunk) == 0:
            continue
        if chunk.type != pa.string():
            return False
        data = value_bytes(chunk)[0]
        if len(data) and not _plain_bytes(data):
            return False
    return True


def json_texts(arr: pa.Array, kind: str) -> pa.Array:
    """Each value of a typed column as ``json.dumps`` writes it (null: ``null``)."""
    if kind == "string":
        quoted = pc.binary_join_element_wise('"', arr, '"', "")
        if not _all_plain(arr):
            plain = pc.match_substring_regex(arr, _PLAIN).fill_null(True)
            quoted = pc.if_else(plain, quoted, _per_distinct(arr, json.dumps))
    elif kind in ("double", "number"):
        quoted = _per_distinct(arr, float.__repr__)
    else:  # integers, and times as int64 nanoseconds
        quoted = pc.cast(arr, pa.string())
    return quoted.fill_null("null")


def hex20(digests: bytes, suffix: bytes = b"") -> tuple[pa.Array, np.ndarray]:
    """(the first 20 hex digits of each 32-byte digest of ``digests`` (their bytes one after
    another) followed by ``suffix``, its first 8 bytes as a signed key): the texts are
    written into one buffer of fixed-width rows, not made one by one."""
    m = np.frombuffer(digests, np.uint8).reshape(-1, 32)
    rows, width = len(m), 20 + len(suffix)
    key = m[:, :8].copy().view(">i8").reshape(-1).astype(np.int64)
    text = np.empty((rows, width), np.uint8)
    text[:, 0:20:2] = _HEX[m[:, :10] >> 4]
    text[:, 1:20:2] = _HEX[m[:, :10] & 15]
    text[:, 20:] = np.frombuffer(suffix, np.uint8)
    offsets = np.arange(0, width * (rows + 1), width, dtype=np.int32)
    return pa.StringArray.from_buffers(rows, pa.py_buffer(offsets), pa.py_buffer(text)), key


def _pieces(source, typed: dict[str, pa.Array], texts: dict[str, pa.Array]) -> list:
    """The JSON list of a row as the pieces of one ``binary_join_element_wise``: literal
    text (adjacent literals merged) and columns. A text column without nulls whose values
    JSON writes as they are goes in as it is, its quotes among the literals."""
    pieces: list = ["[" + json.dumps(source.name)]

    def add(*parts) -> None:
        for part in parts:
            if isinstance(part, str) and isinstance(pieces[-1], str):
                pieces[-1] += part
            else:
                pieces.append(part)

    for c, kind in source.columns.items():
        arr = typed[c]
        if c in texts:
            add(", ", texts[c].fill_null("null"))
        elif kind == "string" and arr.null_count == 0 and _all_plain(arr):
            add(', "', arr, '"')
        else:
            add(", ", json_texts(arr, kind))
    add("]")
    return pieces


def content_ids(source, typed: dict[str, pa.Array], texts: dict[str, pa.Array] | None = None
                ) -> tuple[pa.Array, np.ndarray]:
    """(``<digest>-1`` per row, the content key per row) of typed columns (times: int64
    ns; ``texts``: columns already written as JSON). The occurrence numbers come from
    ``renumber``."""
    n = len(next(iter(typed.values()))) if typed else 0
    if n == 0:
        return pa.array([], pa.string()), np.zeros(0, np.int64)
    text = pc.binary_join_element_wise(*_pieces(source, typed, texts or {}), "")
    sha = hashlib.sha256
    digests = b"".join([sha(t).digest() for t in text.cast(pa.binary()).to_pylist()])
    return hex20(digests, b"-1")


def id_keys(ids: pa.Array) -> np.ndarray:
    """A 64-bit key of each id (repeats are found by counting keys, not texts)."""
    blake = hashlib.blake2b
    return np.array([int.from_bytes(blake(t, digest_size=8).digest(), "big", signed=True)
                     for t in ids.cast(pa.binary()).to_pylist()], np.int64)


def occurrences(files: np.ndarray, content: np.ndarray, lines: np.ndarray) -> np.ndarray:
    """Each row's number among the rows of its file with the same content key, in line
    order (1, 2, …)."""
    rows = len(files)
    if rows == 0:
        return np.zeros(0, np.int64)
    order = np.lexsort((lines, content, files))
    f_s, c_s = files[order], content[order]
    first = np.ones(rows, bool)
    first[1:] = (f_s[1:] != f_s[:-1]) | (c_s[1:] != c_s[:-1])
    starts = np.maximum.accumulate(np.where(first, np.arange(rows), 0))
    number = np.empty(rows, np.int64)
    number[order] = np.arange(rows) - starts + 1
    return number


def id_key(content, n):
    """The 64-bit key of ``<content>-<n>`` (numpy int64 arrays; wraps as int64 does)."""
    with np.errstate(over="ignore"):
        return content * MIX + n


def numbered_in_files(table: pa.Table) -> pa.Table:
    """A typed table whose content-hash ids (``<digest>-1``) are numbered over each of its
    files, all of whose rows it holds (``occurrences``)."""
    if not table.num_rows:
        return table
    n = occurrences(table.column("_fi").to_numpy(), table.column("_ck").to_numpy(),
                    table.column("_line").to_numpy())
    return table.set_column(table.schema.get_field_index("event_id"), "event_id",
                            numbered(table.column("event_id").combine_chunks(), n))


def numbered(ids: pa.Array, n: np.ndarray) -> pa.Array:
    """``<digest>-1`` ids renumbered ``<digest>-<n>``."""
    digest = pc.utf8_slice_codeunits(ids, 0, 20)
    return pc.binary_join_element_wise(digest, pc.cast(pa.array(n), pa.string()), "-")


class SplitNumbers:
    """Content-hash ids numbered within one split, block after block: the counts of each
    content key so far (sorted keys and their counts: integer arrays, not a dict)."""

    def __init__(self):
        self.keys = np.zeros(0, np.int64)
        self.counts = np.zeros(0, np.int64)

    def number(self, table: pa.Table) -> pa.Table:
        """``table`` (a typed block, ids ``<digest>-1``) with each row's number among the
        identical rows of the split so far (``_n``, the id and its key follow)."""
        if table.num_rows == 0:
            return table
        ck = table.column("_ck").to_numpy()
        n = occurrences(np.zeros(len(ck), np.int64), ck, table.column("_line").to_numpy())
        if len(self.keys):
            at = np.clip(np.searchsorted(self.keys, ck), 0, len(self.keys) - 1)
            n = n + np.where(self.keys[at] == ck, self.counts[at], 0)
        block, block_counts = np.unique(ck, return_counts=True)
        merged, where = np.unique(np.concatenate([self.keys, block]), return_inverse=True)
        self.counts = np.bincount(where, weights=np.concatenate(
            [self.counts, block_counts]).astype(np.float64)).astype(np.int64)
        self.keys = merged
        if int(n.max()) == 1:
            return table
        table = table.set_column(table.schema.get_field_index("event_id"), "event_id",
                                 numbered(table.column("event_id").combine_chunks(), n))
        table = table.set_column(table.schema.get_field_index("_k"), "_k",
                                 pa.array(id_key(ck, n)))
        return table.set_column(table.schema.get_field_index("_n"), "_n", pa.array(n))
