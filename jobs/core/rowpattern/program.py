"""A row pattern compiled once into a small program that a matcher only steps, as
regular-expression engines (and Trino's matcher) do: ``label v`` consumes the current row
as ``v``; ``split a b`` tries ``a`` first and ``b`` on failure (the preferment order of
SQL:2016: greedy quantifiers prefer more iterations, reluctant fewer, alternation the
left branch, PERMUTE the lexicographic order of its items); ``jump``; ``excl`` enters or
leaves an exclusion ``{- -}``; ``anchor`` tests ``^`` or ``$``; ``save k`` and
``progress k`` stop an unbounded loop from repeating an iteration that matched no row."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations

from jobs.core.rowpattern.model import (
    Alt,
    Anchor,
    Concat,
    Empty,
    Exclude,
    Label,
    Permute,
    Quant,
)


@dataclass(frozen=True)
class Program:
    ops: tuple[tuple, ...]
    slots: int  # the unbounded loops, each with the row its current iteration began at

    def __str__(self) -> str:
        return "\n".join(f"{i:3d} {' '.join(map(str, op))}" for i, op in enumerate(self.ops))


def compile_row_pattern(node) -> Program:
    """The program of a row pattern; it ends with ``done``."""
    b = _Builder()
    b.emit(node)
    b.add("done")
    return Program(tuple(tuple(op) for op in b.ops), b.slots)


class _Builder:
    def __init__(self):
        self.ops: list[list] = []
        self.slots = 0

    def here(self) -> int:
        return len(self.ops)

    def add(self, *op) -> int:
        self.ops.append(list(op))
        return len(self.ops) - 1

    def emit(self, node) -> None:
        if isinstance(node, Label):
            self.add("label", node.name)
        elif isinstance(node, Empty):
            pass
        elif isinstance(node, Concat):
            for item in node.items:
                self.emit(item)
        elif isinstance(node, Alt):
            self.alternation(node.items)
        elif isinstance(node, Permute):
            self.alternation([Concat(order) for order in permutations(node.items)])
        elif isinstance(node, Anchor):
            self.add("anchor", node.kind)
        elif isinstance(node, Exclude):
            self.add("excl", 1)
            self.emit(node.item)
            self.add("excl", -1)
        elif isinstance(node, Quant):
            self.quantifier(node)
        else:  # pragma: no cover - the parser builds nothing else
            raise TypeError(f"not a row pattern node: {node!r}")

    def alternation(self, items) -> None:
        jumps = []
        for item in items[:-1]:
            split = self.add("split", None, None)
            self.ops[split][1] = self.here()
            self.emit(item)
            jumps.append(self.add("jump", None))
            self.ops[split][2] = self.here()
        self.emit(items[-1])
        for j in jumps:
            self.ops[j][1] = self.here()

    def quantifier(self, q: Quant) -> None:
        for _ in range(q.low):
            self.emit(q.item)
        if q.high is None:
            slot = self.slots
            self.slots += 1
            top = self.add("split", None, None)
            body = self.here()
            self.add("save", slot)
            self.emit(q.item)
            self.add("progress", slot)
            self.add("jump", top)
            self._order(top, body, self.here(), q.greedy)
            return
        splits = []
        for _ in range(q.high - q.low):
            split = self.add("split", None, None)
            splits.append((split, self.here()))
            self.emit(q.item)
        end = self.here()
        for split, body in splits:
            self._order(split, body, end, q.greedy)

    def _order(self, split: int, body: int, exit_: int, greedy: bool) -> None:
        self.ops[split][1:] = [body, exit_] if greedy else [exit_, body]



def automaton(program: Program) -> tuple[list[tuple[int, str]], list[tuple[int, int]], set[int]]:
    """The program as an automaton over variables (for drawing): its states (0, the
    start, then one per ``label`` instruction: (instruction, variable)), its transitions
    (a state to each ``label`` reachable without consuming a row; anchors and loop checks
    are passed through) and its accepting states (those from which ``done`` is reachable
    without consuming a row)."""
    ops = program.ops
    labels = [i for i, op in enumerate(ops) if op[0] == "label"]
    states = [(0, "start")] + [(i, ops[i][1]) for i in labels]

    def closure(pc: int) -> tuple[set[int], bool]:
        seen, stack, found, done = set(), [pc], set(), False
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            kind = ops[i][0]
            if kind == "label":
                found.add(i)
            elif kind == "done":
                done = True
            elif kind == "split":
                stack += [ops[i][1], ops[i][2]]
            elif kind == "jump":
                stack.append(ops[i][1])
            else:  # excl, anchor, save, progress
                stack.append(i + 1)
        return found, done

    edges, accepting = [], set()
    for k, (i, _) in enumerate(states):
        targets, done = closure(0 if k == 0 else i + 1)
        edges += [(k, labels.index(t) + 1) for t in sorted(targets)]
        if done:
            accepting.add(k)
    return states, edges, accepting
