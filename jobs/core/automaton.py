"""The SES automaton, compiled once per pattern and run many times.

SES paper, section 4: one automaton per event set with a state per subset of its
variables and a loop per bound group variable (4.2.1), concatenated in set order with the
added time constraints v'.T < v.T on the transitions that leave a set's start state
(4.2.2); executed by Algorithms 1-2 (instances with a match buffer, branching when several
transitions fire, an unchanged instance when none fires, expiry after τ).

Compilation turns each transition's condition set Θδ into index-based checks: the
properties of the bound variable become one bit of a per-event mask (computed once per
event), relationships become (attribute, operator, other variable, other attribute)
tuples checked against every event already bound to the other variable, and ``prev``
relationships compare with the variable's last bound event. Θδ includes the transitive
closure Θ+eq of the equality relationships (DESIGN.md section 4), except, when the caller
guarantees that all events share the partition values, the equalities on the partition
attributes X (match-window paper, section 4.4).
"""

from __future__ import annotations

from dataclasses import dataclass

from .conditions import FLIPPED, compare
from .events import Event
from .filtering import PropertyMasks
from .matches import Match
from .pattern import Pattern

# An instance is (state, bindings, first_ts, last_ts); bindings is a tuple with one tuple of
# events per variable (pattern order).
Instance = tuple


@dataclass(frozen=True)
class Transition:
    var: int  # index of the variable bound
    target: int  # state reached
    new_set: bool  # leaves a set's start state: every bound event must be strictly earlier
    rels: tuple[tuple[str, str, int, str], ...]  # (attr, op, other var, other attr)
    prevs: tuple[tuple[str, str, str], ...]  # (attr of the previous event, op, attr of e)


class SESAutomaton:
    """N = (Q, Δ, q_s, q_f, τ) for a pattern (SES paper, Def. 3)."""

    def __init__(self, pattern: Pattern, partitioned: bool = False):
        self.pattern = pattern
        self.tau = pattern.tau
        self.partitioned = partitioned
        variables = pattern.variables
        self.m = len(variables)
        self.names = tuple(v.name for v in variables)
        index = {v.name: v.index for v in variables}
        self.event_mask = PropertyMasks(pattern)  # ē of an event (Theorem 1)
        dropped = set(pattern.partition_attributes) if partitioned else set()
        rels = []
        for r in pattern.relationships + pattern.equality_closure:
            if r.is_equality_on_one_attribute() and r.left.attr in dropped:
                continue
            rels.append(r)
        rels = list(dict.fromkeys(rels))

        # states: (set i, bitmask over the variables of set i); the state "all of set i
        # bound" doubles as the start state of set i + 1 (the merge of 4.2.2)
        sets = pattern.sets
        self.state_ids: dict[tuple[int, int], int] = {}
        for i, s in enumerate(sets):
            for sub in range(1 << len(s)):
                if i > 0 and sub == 0:
                    continue
                self.state_ids[(i, sub)] = len(self.state_ids)
        self.start = self.state_ids[(0, 0)]
        self.final = self.state_ids[(len(sets) - 1, (1 << len(sets[-1])) - 1)]
        self.transitions: list[tuple[Transition, ...]] = [()] * len(self.state_ids)
        self.labels: list[str] = [""] * len(self.state_ids)
        for (i, sub), sid in self.state_ids.items():
            bound = {v.name for s in sets[:i] for v in s} | \
                {v.name for j, v in enumerate(sets[i]) if sub >> j & 1}
            self.labels[sid] = "{" + ", ".join(n for n in self.names if n in bound) + "}"
            out = []
            for j, v in enumerate(sets[i]):
                if not sub >> j & 1:
                    out.append(self._transition(v, self.state_ids[(i, sub | 1 << j)], False,
                                                bound, rels, index))
                elif v.group:
                    out.append(self._transition(v, sid, False, bound, rels, index))
            if sub == (1 << len(sets[i])) - 1 and i + 1 < len(sets):
                for j, v in enumerate(sets[i + 1]):
                    out.append(self._transition(v, self.state_ids[(i + 1, 1 << j)], True,
                                                bound, rels, index))
            self.transitions[sid] = tuple(out)

    def _transition(self, v, target, new_set, bound, rels, index) -> Transition:
        checks = []
        for r in rels:
            if r.left.var == v.name and r.right.var in bound:
                checks.append((r.left.attr, r.op, index[r.right.var], r.right.attr))
            elif r.right.var == v.name and r.left.var in bound:
                checks.append((r.right.attr, FLIPPED[r.op], index[r.left.var], r.left.attr))
        prevs = tuple((p.attr, p.op, p.other_attr) for p in self.pattern.prev_relationships[v.name])
        return Transition(v.index, target, new_set, tuple(checks), prevs)

    # -- per event -------------------------------------------------------------------
    def consume(self, inst: Instance, e: Event, emask: int) -> list[Instance]:
        """ConsumeEvent (SES paper, Algorithm 2)."""
        state, bindings, first_ts, last_ts = inst
        out = []
        attrs = e.attrs
        for t in self.transitions[state]:
            if not emask >> t.var & 1:
                continue
            if t.new_set and not e.ts > last_ts:
                continue
            ok = True
            for attr, op, other, other_attr in t.rels:
                value = attrs.get(attr)
                for x in bindings[other]:
                    if not compare(op, value, x.attrs.get(other_attr)):
                        ok = False
                        break
                if not ok:
                    break
            if ok and t.prevs and bindings[t.var]:
                last = bindings[t.var][-1].attrs
                for pattr, op, attr in t.prevs:
                    if not compare(op, last.get(pattr), attrs.get(attr)):
                        ok = False
                        break
            if ok:
                v = t.var
                nb = bindings[:v] + (bindings[v] + (e,),) + bindings[v + 1:]
                out.append((t.target, nb, e.ts if state == self.start else first_ts, e.ts))
        if not out and state != self.start:
            out.append(inst)
        return out

    def new_instance(self) -> Instance:
        return (self.start, ((),) * self.m, 0, 0)

    def to_match(self, inst: Instance) -> Match:
        return Match(self.pattern.name, tuple(zip(self.names, inst[1])))

    # -- execution ---------------------------------------------------------------------
    def run_from_first(self, window: list[Event], masks: list[int] | None = None):
        """A(P, W): the instance started at W's first event, run over W (all within τ of
        it); returns (earliest-maximal matches starting at W[0], peak instances)."""
        if masks is None:
            masks = [self.event_mask(e) for e in window]
        alive = self.consume(self.new_instance(), window[0], masks[0])
        peak = len(alive)
        for e, mask in zip(window[1:], masks[1:]):
            if not alive:
                break
            nxt = []
            for inst in alive:
                nxt.extend(self.consume(inst, e, mask))
            alive = nxt
            if len(alive) > peak:
                peak = len(alive)
        final = self.final
        return [self.to_match(i) for i in alive if i[0] == final], peak

    def run_eager(self, events: list[Event], stats: dict | None = None) -> list[Match]:
        """SESExec (SES paper, Algorithm 1): an instance started at every event."""
        results: dict[tuple, Match] = {}
        alive: list[Instance] = []
        peak = 0
        tau, final, start = self.tau, self.final, self.start
        for e, mask in zip(events, self.event_mask.batch(events)):
            alive.append(self.new_instance())
            nxt = []
            for inst in alive:
                if inst[0] != start and e.ts - inst[2] > tau:
                    if inst[0] == final:
                        m = self.to_match(inst)
                        results[m.key] = m
                    continue
                nxt.extend(self.consume(inst, e, mask))
            alive = nxt
            if len(alive) > peak:
                peak = len(alive)
        for inst in alive:
            if inst[0] == final:
                m = self.to_match(inst)
                results[m.key] = m
        if stats is not None:
            stats["max_instances"] = max(stats.get("max_instances", 0), peak)
            stats["matcher_calls"] = stats.get("matcher_calls", 0) + len(events)
        return list(results.values())

    def describe(self) -> str:
        """The states and transitions, for people (and the docs)."""
        lines = []
        for sid, ts in enumerate(self.transitions):
            for t in ts:
                kind = "loop" if t.target == sid else "new set" if t.new_set else ""
                lines.append(f"{self.labels[sid]} --{self.names[t.var]}--> "
                             f"{self.labels[t.target]} {kind}".rstrip())
        return "\n".join(lines)
