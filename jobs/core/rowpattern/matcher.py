"""The reference row-pattern matcher: SQL:2016's definition run by backtracking, as a
regular-expression engine runs, over one partition's rows in order.

From a starting row, the program's paths are tried in preferment order and the first
that reaches ``done`` is the match (not the longest one). A row is labelled ``v`` only if
``v``'s DEFINE condition holds on the match so far with that row as its last (RUNNING
semantics); a variable without DEFINE fits every row. After a match, the next attempt
starts where AFTER MATCH SKIP says; after an empty match, or no match, at the next row.

Two paths that reach the same instruction having labelled the same rows the same way
(and with the same loop positions) continue identically, so the second is dropped: this
makes patterns such as ``(A+)+ B`` linear instead of exponential, as Trino's matcher does.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.core.errors import UserError
from jobs.core.rowpattern.evaluate import EvaluationError, Frame, holds
from jobs.core.rowpattern.model import Skip
from jobs.core.rowpattern.program import Program
from jobs.core.rowpattern.pruning import first_variables, row_local
from jobs.core.rowpattern.vectorized import fitting_vector


class SkipError(UserError):
    """AFTER MATCH SKIP TO a variable that cannot be skipped to (SQL:2016 makes it an
    error: the variable is not in the match, or it is the match's first row)."""


@dataclass(frozen=True)
class RowMatch:
    """A match: its number in the partition (from 1), its first row (for an empty match
    the row it was found at) and each row's label and exclusion."""

    number: int
    start: int
    labels: tuple[str, ...]
    excluded: tuple[bool, ...]

    @property
    def empty(self) -> bool:
        return not self.labels

    @property
    def end(self) -> int:
        """The last row (for an empty match, the row before its start)."""
        return self.start + len(self.labels) - 1

    def rows_of(self, members) -> list[int]:
        return [self.start + i for i, v in enumerate(self.labels) if v in members]


class _Node:
    """One label appended to a path's labels; equal label sequences share one node."""

    __slots__ = ("parent", "label", "excluded", "length")

    def __init__(self, parent, label, excluded, length):
        self.parent, self.label, self.excluded, self.length = parent, label, excluded, length

    def unwind(self) -> tuple[list[str], list[bool]]:
        labels, excluded, n = [], [], self
        while n.parent is not None:
            labels.append(n.label)
            excluded.append(n.excluded)
            n = n.parent
        return labels[::-1], excluded[::-1]


def find_match(program: Program, rows: list[dict], start: int, defines: dict, subsets: dict,
               ts: list[int] | None = None, within_ns: int | None = None, number: int = 1,
               local: dict[str, list[bool]] | None = None):
    """The preferred match from row ``start``: ``(labels, excluded)`` or None; ``number``
    is the match number it would get (``MATCH_NUMBER()`` in DEFINE); ``local``: for the
    variables whose condition reads only the row itself, whether each row fits it
    (``fitting_rows``), so that trying a row costs a lookup."""
    local = local or {}
    ops, n = program.ops, len(rows)
    root = _Node(None, None, False, 0)
    interned: dict[tuple, _Node] = {}
    visited: set[tuple] = set()
    stack = [(0, root, 0, (None,) * program.slots)]
    while stack:
        pc, node, depth, saved = stack.pop()
        while True:
            key = (pc, id(node), depth, saved)
            if key in visited:
                break
            visited.add(key)
            op = ops[pc]
            kind = op[0]
            pos = start + node.length
            if kind == "label":
                if pos >= n or (within_ns is not None and ts[pos] - ts[start] >= within_ns):
                    break
                var = op[1]
                fits = local.get(var)
                if fits is not None and not fits[pos]:
                    break
                k = (id(node), var, depth > 0)
                child = interned.get(k)
                if child is None:
                    child = interned[k] = _Node(node, var, depth > 0, node.length + 1)
                condition = None if fits is not None else defines.get(var)
                if condition is not None:
                    labels, _ = child.unwind()
                    if not holds(condition, Frame(rows, start, labels, pos, False, number,
                                                  subsets)):
                        break
                node, pc = child, pc + 1
            elif kind == "split":
                stack.append((op[2], node, depth, saved))
                pc = op[1]
            elif kind == "jump":
                pc = op[1]
            elif kind == "excl":
                depth += op[1]
                pc += 1
            elif kind == "anchor":
                if (op[1] == "^" and pos != 0) or (op[1] == "$" and pos != n):
                    break
                pc += 1
            elif kind == "save":
                saved = saved[:op[1]] + (pos,) + saved[op[1] + 1:]
                pc += 1
            elif kind == "progress":
                if saved[op[1]] == pos:  # an iteration that matched no row: not repeated
                    break
                pc += 1
            else:  # done
                return node.unwind()
    return None


def partition_matches(query, program: Program, rows: list[dict], ts: list[int] | None = None,
                      local: dict[str, list[bool]] | None = None, prune: bool = True):
    """Every match of one partition, in order: ``("match", RowMatch)``, and, for ALL ROWS
    PER MATCH WITH UNMATCHED ROWS, ``("unmatched", row)`` for each row no match covers
    (``local``: ``fitting_rows`` of the partition, when the caller has it; ``prune``: skip
    the rows no first variable fits, ``possible_starts``; the same matches)."""
    defines, subsets = query.define_map, query.subset_map
    unmatched = query.rows_per_match == "unmatched"
    local = fitting_rows(query, rows) if local is None else local
    starts = possible_starts(query, local, len(rows)) if prune else None
    pos, number, covered = 0, 0, -1
    while pos < len(rows):
        if starts is not None and not starts[pos]:
            found = None  # no variable that can begin a match fits this row
        else:
            found = find_match(program, rows, pos, defines, subsets, ts, query.within_ns,
                               number + 1, local)
        if found is None:
            if unmatched and pos > covered:
                yield "unmatched", pos
            pos += 1
            continue
        number += 1
        labels, excluded = found
        m = RowMatch(number, pos, tuple(labels), tuple(excluded))
        yield "match", m
        if m.empty:  # its row is output as the empty match, not as unmatched
            pos += 1
            continue
        covered = max(covered, m.end)
        pos = _skip_to(query.skip, m, subsets, query.name)


def possible_starts(query, local: dict[str, list[bool]], n: int) -> list[bool] | None:
    """Whether each row may begin a match: some variable that can label a match's first
    row fits it. None: any row may (the pattern can match no row, or a first variable's
    condition reads more than its row)."""
    first, empty = first_variables(query.pattern)
    if empty or not first or any(v not in local for v in first):  # (an undefined one fits all)
        return None
    vectors = [local[v] for v in first]
    return [any(vec[r] for vec in vectors) for r in range(n)]


VECTOR_ROWS = 256  # a smaller partition is faster row by row than through Arrow's calls


def fitting_rows(query, rows: list[dict], vectorized: bool = True) -> dict[str, list[bool]]:
    """For each variable whose DEFINE reads only the row being labelled (``row_local``):
    whether each row fits it, computed once per partition, on whole columns where Arrow
    can (``vectorized``). A condition that cannot be computed on some row is left to the
    matcher (which may never try that row)."""
    out, columns = {}, {}
    for var, condition in query.defines:
        if row_local(condition, var):
            fits = fitting_vector(condition, rows, columns) \
                if vectorized and len(rows) >= VECTOR_ROWS else None
            if fits is None:
                try:
                    fits = [holds(condition, Frame(rows, r, [var], r, False, 1, {}))
                            for r in range(len(rows))]
                except EvaluationError:
                    continue
            out[var] = fits
    return out


def _skip_to(skip: Skip, m: RowMatch, subsets: dict, name: str) -> int:
    if skip.kind == "past_last":
        return m.end + 1
    if skip.kind == "next_row":
        return m.start + 1
    rows = m.rows_of(set(subsets.get(skip.var, (skip.var,))))
    if not rows:
        raise SkipError(f"{name}: AFTER MATCH SKIP TO {skip.var} failed: {skip.var} is not in "
                        f"match {m.number} (rows {m.start}..{m.end} of its partition)")
    row = rows[0] if skip.kind == "first" else rows[-1]
    if row == m.start:
        raise SkipError(f"{name}: AFTER MATCH SKIP TO {skip.var} failed: it is the first row "
                        f"of match {m.number}, so matching would never move on")
    return row
