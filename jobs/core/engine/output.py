"""Match batches as Arrow arrays: ISO timestamps, binding lists, JSON lines, match ids.

Everything here works on whole batches (Arrow compute), so the local ``match`` command
and phase 2 build no Python object per match, except the SHA-256 of a match id.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.core.engine.batches import MatchBatch, batch_take
from jobs.core.engine.columns import EventColumns
from jobs.core.language.events import format_ts

_NEEDS_ESCAPE = r'["\\\x00-\x1f]|[^\x00-\x7f]'


def iso_timestamps(ns: np.ndarray) -> pa.Array:
    """``events.format_ts`` for an array: ISO-8601 UTC without offset, with 3, 6 or 9
    fraction digits only when needed. Each distinct value is formatted once."""
    ns = np.asarray(ns, dtype=np.int64)
    distinct, inverse = np.unique(ns, return_inverse=True)
    return _iso(distinct).take(pa.array(inverse.ravel()))


def _iso(ns: np.ndarray) -> pa.Array:
    secs = np.floor_divide(ns, 1_000_000_000)
    rem = ns - secs * 1_000_000_000
    base = pa.array(np.datetime_as_string(secs.astype("datetime64[s]"), unit="s"))
    if not rem.any():
        return base
    frac9 = pc.utf8_lpad(pc.cast(pa.array(rem), pa.string()), 9, "0")
    dot = pa.scalar(".")
    f3 = pc.binary_join_element_wise(dot, pc.utf8_slice_codeunits(frac9, 0, 3), "")
    f6 = pc.binary_join_element_wise(dot, pc.utf8_slice_codeunits(frac9, 0, 6), "")
    f9 = pc.binary_join_element_wise(dot, frac9, "")
    empty = pa.array([""] * len(ns))
    frac = pc.if_else(pa.array(rem == 0), empty,
                      pc.if_else(pa.array(rem % 1_000_000 == 0), f3,
                                 pc.if_else(pa.array(rem % 1000 == 0), f6, f9)))
    return pc.binary_join_element_wise(base, frac, "")


def _match_of(batch: MatchBatch) -> np.ndarray:
    return np.repeat(np.arange(len(batch)), np.diff(batch.offsets))


@dataclass
class Bindings:
    """The bindings of a batch, built once and shared by every output format: per
    variable, the list of bound event ids of every match; ``plain`` when no id needs JSON
    escaping (then the formats are built with Arrow compute)."""

    names: list[str]
    lists: list[pa.ListArray]
    plain: bool

    def __len__(self) -> int:
        return len(self.lists[0]) if self.lists else 0

    def per_match(self) -> list[dict[str, list[str]]]:
        """{variable: ids} of every match (the slow path, for ids that need escaping)."""
        per_var = [lst.to_pylist() for lst in self.lists]
        return [{v: per_var[j][k] for j, v in enumerate(self.names)} for k in range(len(self))]


def bindings_of(batch: MatchBatch, cols: EventColumns, names: list[str]) -> Bindings:
    ids = cols.ids.take(pa.array(batch.rows))
    match_of = _match_of(batch)
    lists = []
    for v in range(len(names)):
        sel = np.flatnonzero(batch.variables == v)
        counts = np.bincount(match_of[sel], minlength=len(batch))
        offsets = np.zeros(len(batch) + 1, np.int32)
        np.cumsum(counts, out=offsets[1:])
        lists.append(pa.ListArray.from_arrays(pa.array(offsets), ids.take(pa.array(sel))))
    plain = not pc.any(pc.match_substring_regex(ids, _NEEDS_ESCAPE)).as_py()
    return Bindings(names, lists, plain)


def sort_batch(batch: MatchBatch, cols: EventColumns, m: int, id_rank: np.ndarray
               ) -> MatchBatch:
    """Order as ``matches.Match.sort_key``: first event, end, then the bindings' ids
    variable by variable (a shorter sequence before its extensions)."""
    if len(batch) < 2:
        return batch
    match_of = _match_of(batch)
    counts = np.zeros((len(batch), m), np.int64)
    np.add.at(counts, (match_of, batch.variables), 1)
    width = counts.max(axis=0)
    col0 = np.concatenate([[0], np.cumsum(width)[:-1]])
    new_run = np.r_[True, (np.diff(match_of) != 0) | (np.diff(batch.variables) != 0)]
    run_start = np.flatnonzero(new_run)
    run_id = np.cumsum(new_run) - 1
    pos = np.arange(len(batch.rows)) - run_start[run_id]
    key = np.full((len(batch), int(width.sum())), -1, np.int64)
    key[match_of, col0[batch.variables] + pos] = id_rank[batch.rows]
    order = np.lexsort(tuple(key[:, k] for k in range(key.shape[1] - 1, -1, -1))
                       + (batch.end_ts, batch.first))
    return batch_take(batch, order)


def _joined(lists: list[pa.ListArray], sep: str) -> list[pa.Array]:
    """Per variable, its quoted ids joined: ``"e3"<sep>"e9"`` (a singleton's list is its
    one quoted id)."""
    quote = pa.scalar('"')
    out = []
    for lst in lists:
        quoted = pc.binary_join_element_wise(quote, lst.flatten(), quote, "")
        offsets = lst.offsets.to_numpy()
        if len(quoted) == len(lst) and np.array_equal(offsets, np.arange(len(lst) + 1)):
            out.append(quoted)
        else:
            out.append(pc.binary_join(pa.ListArray.from_arrays(lst.offsets, quoted), sep))
    return out


def _concat(parts: list) -> pa.Array:
    return pc.binary_join_element_wise(*parts, "")


def _bindings_parts(b: Bindings) -> list:
    """``{"c": ["e1"], "p": ["e3", "e9"]}`` as json.dumps writes it, in parts."""
    parts: list = [pa.scalar("{")]
    for k, (v, joined) in enumerate(zip(b.names, _joined(b.lists, ", "))):
        parts += [pa.scalar((", " if k else "") + json.dumps(v) + ": ["), joined,
                  pa.scalar("]")]
    parts.append(pa.scalar("}"))
    return parts


def json_lines(name: str, batch: MatchBatch, b: Bindings, alternative: int | None = None,
               measures: dict[str, list] | None = None) -> bytes:
    """The ``match`` command's output for a batch: one JSON object per line, as
    ``Match.to_json`` writes it (with the alternative of a disjunction's matches, and the
    ``measures`` of a pattern that has them: column -> one value per match)."""
    if not len(batch):
        return b""
    head = {"pattern": name} | ({} if alternative is None else {"alternative": alternative})
    if not b.plain or measures is not None:
        rows = [{}] * len(batch) if measures is None else \
            [{"measures": {c: measures[c][k] for c in measures}} for k in range(len(batch))]
        return "".join(json.dumps(head | {"start": format_ts(int(s)), "end": format_ts(int(e)),
                                          "bindings": d} | extra) + "\n"
                       for s, e, d, extra in zip(batch.start_ts, batch.end_ts, b.per_match(),
                                                 rows)).encode()
    parts = [pa.scalar(json.dumps(head)[:-1] + ', "start": "'),
             iso_timestamps(batch.start_ts), pa.scalar('", "end": "'),
             iso_timestamps(batch.end_ts), pa.scalar('", "bindings": '),
             *_bindings_parts(b), pa.scalar("}\n")]
    lines = _concat(parts)
    _, offsets_buf, data = lines.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[lines.offset:lines.offset + len(lines) + 1]
    return memoryview(data)[offsets[0]:offsets[-1]].tobytes()


def bindings_json(b: Bindings) -> list[str]:
    """The ``bindings`` column of the match tables: ``{"v": ["id", ...], ...}`` with
    ``json.dumps`` spacing, one string per match."""
    if not b.plain:
        return [json.dumps(d) for d in b.per_match()]
    return _concat(_bindings_parts(b)).to_pylist()


def match_ids(version: str, b: Bindings) -> list[str]:
    """``match_id`` for every match of the batch: the JSON it hashes is built with Arrow
    compute, only the SHA-256 runs per match."""
    if not b.plain or json.dumps(version) != f'"{version}"':
        return [match_id(version, d.items()) for d in b.per_match()]
    parts: list = [pa.scalar(f'["{version}",[')]
    for k, (v, joined) in enumerate(zip(b.names, _joined(b.lists, ","))):
        parts += [pa.scalar(("," if k else "") + f"[{json.dumps(v)},["), joined, pa.scalar("]]")]
    parts.append(pa.scalar("]]"))
    return [hashlib.sha256(x.encode()).hexdigest()[:32] for x in _concat(parts).to_pylist()]


def match_id(version: str, key) -> str:
    """Deterministic from the pattern version and the bindings (docs/semantics.md):
    ``key`` is ((variable, event ids), ...) in pattern order."""
    blob = json.dumps([version, [[v, list(ids)] for v, ids in key]], separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def match_id_of(pattern, m) -> str:
    """The ``match_id`` of a ``matches.Match`` of ``pattern`` (a disjunction's matches
    hash their alternative's version, so the alternative is part of the id)."""
    if pattern.kind == "window":  # a window.Window
        return match_id(pattern.version, m.bindings().items())
    version = pattern.alternatives[m.alternative - 1].version if m.alternative \
        else pattern.version
    return match_id(version, m.key)
