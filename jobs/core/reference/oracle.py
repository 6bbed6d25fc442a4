"""The test oracle: slow, literal transcriptions of the papers' definitions.

* ``all_matches``: every match of Definition 2 (match-window paper, conditions 1-3), by
  enumerating substitutions inside the τ-window of each possible first event.
* ``ses_exec``: SESExec / ConsumeEvent (SES paper, Algorithms 1-2) as written: an
  automaton instance is started at every event; transitions and their conditions Θδ are
  derived on the fly from the pattern (section 4.2), with Θ+eq added (docs/semantics.md).
* ``ses_definition``: the SES paper's Definition 2 (conditions 1-5) within one partition,
  used to cross-check ``ses_exec`` where the two agree.
* ``meaning``: one of the first two by matcher; for a disjunction, the union over its
  alternatives.

Aggregate conditions (docs/semantics.md) hold or not for a whole match: ``all_matches``
checks them with the other conditions of Definition 2 on every complete binding;
``ses_exec`` keeps an earliest-maximal match of the other conditions only if they hold.

Nothing here prunes beyond what a definition states; these functions are the spec.
"""

from __future__ import annotations

from collections import defaultdict

from jobs.core.language.events import Event
from jobs.core.language.history import mark
from jobs.core.language.optional import expansions
from jobs.core.language.pattern import Disjunction, Pattern, Variable
from jobs.core.reference.matches import (
    Match,
    aggregates_hold,
    is_match,
    make_match,
    relationships_hold,
    set_order_holds,
    with_measure_columns,
)


def meaning(pattern: Pattern | Disjunction, events: list[Event],
            matcher: str | None = None) -> list[Match]:
    """What a pattern means with a matcher (default its own): the earliest-maximal matches
    of SESExec for ``ses``, every match of Definition 2 for ``zstream``. A disjunction
    means the union of its alternatives' matches, each tagged with its alternative."""
    run = ses_exec if (matcher or pattern.matcher) == "ses" else all_matches
    if pattern.marks_needed:
        events, pattern = mark(pattern, events), pattern.marked()  # the whole history
    if isinstance(pattern, Disjunction):  # after_match is refused with alternatives
        return [with_measure_columns(m, pattern.measure_names)
                for alt in pattern.alternatives for m in run(alt, events)]
    return run(pattern, events)


# --------------------------------------------------------------------------------------
# Definition 2 of the match-window paper: all matches
# --------------------------------------------------------------------------------------
def _partial_ok(pattern: Pattern, binding: dict[str, list[Event]]) -> bool:
    """Conditions 1-2 restricted to the variables bound so far (for pruning the search)."""
    return relationships_hold(pattern, binding) and set_order_holds(pattern, binding)


def _group_sequences(var: Variable, pattern: Pattern, candidates: list[Event]):
    """Every subsequence of ``candidates`` whose consecutive pairs satisfy prev and whose
    length is within the variable's bounds."""
    prevs = pattern.declared_prev_relationships[var.name]
    running = pattern.running_conditions[var.name]
    if not var.group:
        for e in candidates:
            yield [e]
        return

    def extend(seq, start):
        if len(seq) >= var.min:
            yield seq
        if var.max is not None and len(seq) >= var.max:
            return
        for i in range(start, len(candidates)):
            e = candidates[i]
            if all(p.holds(seq[-1].values, e.values) for p in prevs) and all(
                    r.holds([x.values for x in seq], e.values) for r in running):
                yield from extend(seq + [e], i + 1)

    for i, e in enumerate(candidates):
        yield from extend([e], i + 1)


def matches_starting_at(pattern: Pattern, window: list[Event]) -> list[Match]:
    """All Definition-2 matches among ``window`` whose first event is ``window[0]``."""
    if not window:
        return []
    first = window[0]
    cands = {v.name: [e for e in window if all(p.holds(e.values) for p in pattern.properties[v.name])]
             for v in pattern.variables}
    out: list[Match] = []
    variables = pattern.variables

    def search(i: int, binding: dict[str, list[Event]], used: set[int]):
        if i == len(variables):
            if first.seq in used and is_match(pattern, binding) \
                    and aggregates_hold(pattern, binding):
                out.append(make_match(pattern, binding))
            return
        v = variables[i]
        free = [e for e in cands[v.name] if e.seq not in used]
        for seq in _group_sequences(v, pattern, free):
            binding[v.name] = seq
            if _partial_ok(pattern, binding):
                search(i + 1, binding, used | {e.seq for e in seq})
            del binding[v.name]

    search(0, {}, set())
    return out


def tau_window(events: list[Event], i: int, tau: int) -> list[Event]:
    """Def. 3 of the match-window paper in processing order: e_i and the events after it
    within τ."""
    first = events[i]
    out = []
    for e in events[i:]:
        if e.ts - first.ts > tau:
            break
        out.append(e)
    return out


def preference(m: Match) -> tuple:
    """The order of a partition's matches for after_match: by first event (processing
    order), then the one with more events, then the earlier last event, then the bound
    events variable by variable (docs/semantics.md, after-match skip)."""
    return (m.start.seq, -len(m.events), m.end.seq,
            tuple(tuple(e.seq for e in es) for _, es in m.bindings))


def select_episodes(pattern: Pattern, matches: list[Match]) -> list[Match]:
    """MATCH_RECOGNIZE's AFTER MATCH SKIP on a matcher's matches, per partition (values of
    X of the first event): in ``preference`` order, a match is kept when its first event
    comes after the previous kept match's last event (``past_last_event``), first event
    (``to_next_event``), or, not before its first (last) event bound to v and after its
    first event (``to_first v``, ``to_last v``; v unbound: as to_next_event)."""
    rule = pattern.after_match
    if rule == "all":
        return matches
    words = rule.split()
    parts: dict[tuple, list[Match]] = defaultdict(list)
    for m in matches:
        parts[tuple(m.start.values.get(a) for a in pattern.partition_attributes)].append(m)
    out = []
    for found in parts.values():
        after, at_least = -1, -1  # the next first event: > after and >= at_least (seq)
        for m in sorted(found, key=preference):
            if not (m.start.seq > after and m.start.seq >= at_least):
                continue
            out.append(m)
            if rule == "past_last_event":
                after = m.end.seq
            else:
                after = m.start.seq
                if len(words) == 2:
                    bound = dict(m.bindings)[words[1]]
                    if bound:
                        at_least = (bound[0] if words[0] == "to_first" else bound[-1]).seq
    return out


def optional_matches(pattern: Pattern, events: list[Event], run, maximal: bool) -> list[Match]:
    """A pattern with optional steps: the union of ``run`` over its expansions
    (``language.optional``), each match binding the absent variables to no event; with
    ``maximal`` (SES) only the matches no other match with the same first event strictly
    contains."""
    found: dict[tuple, Match] = {}
    for e in expansions(pattern):
        for m in run(e.pattern, events):
            binding = {v.name: [] for v in pattern.variables}
            binding.update({v: list(es) for v, es in m.bindings})
            full = make_match(pattern, binding)
            found[full.key] = full
    out = list(found.values())
    if maximal:
        pairs = {m.key: {(v, e.seq) for v, es in m.bindings for e in es} for m in out}
        out = [m for m in out if not any(
            o.start.seq == m.start.seq and pairs[m.key] < pairs[o.key] for o in out)]
    return out


def all_matches(pattern: Pattern, events: list[Event]) -> list[Match]:
    """Every match of ``pattern`` in ``events`` (in processing order) by Definition 2,
    with contiguity and negation (docs/language.md) applied to P⁺'s matches."""
    if pattern.optional_units:
        return select_episodes(pattern, optional_matches(pattern, events, all_matches,
                                                         maximal=False))
    out: list[Match] = []
    for i in range(len(events)):
        out.extend(matches_starting_at(pattern, tau_window(events, i, pattern.tau)))
    if any(v.consecutive for v in pattern.variables):
        ranks = consecutive_ranks(pattern, events)
        out = [m for m in out if consecutive_hold(pattern, dict(m.bindings), ranks)]
    if pattern.position_rule is not None:
        pos = positions(pattern, events)
        if pattern.contiguity != "none":
            out = [m for m in out if is_contiguous(m, pos)]
        out = [m for m in out if next_steps_hold(pattern, m, pos)]
    return select_episodes(pattern, negation_filter(pattern, out, events))


# --------------------------------------------------------------------------------------
# Contiguity and negation (docs/language.md; docs/language.md's formal rules)
# --------------------------------------------------------------------------------------
def positions(pattern: Pattern, events: list[Event]) -> dict[int, int]:
    """Each event's position (by ``seq``) in processing order: over all events for strict
    contiguity, within the events of the same partition values X for partition
    contiguity (events with a missing value of X have none)."""
    if pattern.position_rule == "strict" or not pattern.partition_attributes:
        return {e.seq: k for k, e in enumerate(events)}
    out: dict[int, int] = {}
    counters: dict[tuple, int] = defaultdict(int)
    for e in events:
        key = tuple(e.values.get(a) for a in pattern.partition_attributes)
        if any(v is None or v != v for v in key):
            continue
        out[e.seq] = counters[key]
        counters[key] += 1
    return out


def is_contiguous(m: Match, pos: dict[int, int]) -> bool:
    """The bound events are consecutive: their positions form one run."""
    p = sorted(pos.get(e.seq, -10**9) for e in m.events)
    return all(b == a + 1 for a, b in zip(p, p[1:]))


def consecutive_ranks(pattern: Pattern, events: list[Event]) -> dict[str, dict[int, int]]:
    """Per ``consecutive`` group variable, each event's rank (by ``seq``) among the events
    of its partition (values of X; every event without X) that satisfy the variable's
    properties, in processing order."""
    out: dict[str, dict[int, int]] = {}
    for v in pattern.variables:
        if not v.consecutive:
            continue
        counters: dict[tuple, int] = defaultdict(int)
        ranks: dict[int, int] = {}
        for e in events:
            if not all(p.holds(e.values) for p in pattern.properties[v.name]):
                continue
            key = tuple(e.values.get(a) for a in pattern.partition_attributes)
            if any(x is None or x != x for x in key):
                continue
            ranks[e.seq] = counters[key]
            counters[key] += 1
        out[v.name] = ranks
    return out


def consecutive_hold(pattern: Pattern, binding: dict, ranks: dict[str, dict[int, int]]) -> bool:
    """Each ``consecutive`` group's events follow each other among the events that fit it
    (no event of the partition satisfying its properties lies between two of them)."""
    for name, rank in ranks.items():
        seq = [rank.get(e.seq) for e in binding.get(name, ())]
        if None in seq or any(b != a + 1 for a, b in zip(seq, seq[1:])):
            return False
    return True


def next_steps_hold(pattern: Pattern, m: Match, pos: dict[int, int]) -> bool:
    """Every set written ``[next b]`` starts at the position right after the last event of
    the sets before it (positions by ``Pattern.position_rule``)."""
    binding = dict(m.bindings)
    for k in pattern.next_sets:
        before = [pos.get(e.seq) for s in pattern.sets[:k] for v in s for e in binding[v.name]]
        first = min(pos.get(e.seq, -10**9) for v in pattern.sets[k] for e in binding[v.name])
        if None in before or first != max(before) + 1:
            return False
    return True


def next_event(pattern: Pattern, neg, m: Match, events: list[Event], pos: dict[int, int]
               ) -> Event | None:
    """The event ``[not next n]`` looks at: the one right after the last bound event of the
    sets up to ``neg.before`` in the positions (in the match's partition), if any; trailing,
    only up to ``start_ts + τ``."""
    binding = dict(m.bindings)
    last = max((e for s in pattern.sets[:neg.before + 1] for v in s for e in binding[v.name]),
               key=lambda e: pos.get(e.seq, -10**9))
    if last.seq not in pos:
        return None
    key = tuple(last.values.get(a) for a in pattern.partition_attributes) \
        if pattern.position_rule == "partition" else ()
    for e in events:
        if pos.get(e.seq) == pos[last.seq] + 1 and (
                not key or tuple(e.values.get(a) for a in pattern.partition_attributes) == key):
            return e if neg.after is not None or e.ts <= m.start.ts + pattern.tau else None
    return None


def witness(pattern: Pattern, n: str, e: Event, binding: dict) -> bool:
    """``e`` satisfies negated variable ``n``'s properties and its relationships with every
    event bound to a related variable."""
    if not all(p.holds(e.values) for p in pattern.properties[n]):
        return False
    for rel in pattern.negation_relationships[n]:
        x, y = rel.variables
        for b in binding[y if x == n else x]:
            if not (rel.holds(e.values, b.values) if x == n else rel.holds(b.values, e.values)):
                return False
    return True


def negation_interval(pattern: Pattern, neg, m: Match) -> tuple[int, bool, int, bool]:
    """(low, low inclusive?, high, high inclusive?) of a negated variable's interval for
    match ``m``: between sets, strictly after the last event of the set before and
    strictly before the first event of the set after; leading [end_ts - τ, first event);
    trailing (last event, start_ts + τ]."""
    binding = dict(m.bindings)
    stamps = {i: [e.ts for v in s for e in binding[v.name]] for i, s in enumerate(pattern.sets)}
    if neg.before is None:
        return m.end.ts - pattern.tau, True, min(stamps[0]), False
    if neg.after is None:
        return max(stamps[neg.before]), False, m.start.ts + pattern.tau, True
    return max(stamps[neg.before]), False, min(stamps[neg.after]), False


def negation_holds(pattern: Pattern, m: Match, events: list[Event]) -> bool:
    """Fewer than k events (``not n{k,}``; ``not n`` is k = 1: no event) satisfy a negated
    variable's properties and its relationships to the bound events (every event bound to
    a related variable) inside its interval."""
    binding = dict(m.bindings)
    pos = positions(pattern, events) if pattern.next_negations else {}
    for neg in pattern.negations:
        n = neg.var.name
        if neg.next:  # [not next n]: the very next event does not fit n
            e = next_event(pattern, neg, m, events, pos)
            if e is not None and neg.var.min <= 1 and witness(pattern, n, e, binding):
                return False
            continue
        lo, lo_in, hi, hi_in = negation_interval(pattern, neg, m)
        witnesses = 0
        for e in events:
            if not ((e.ts > lo or (lo_in and e.ts == lo)) and (e.ts < hi or (hi_in and e.ts == hi))):
                continue
            if witness(pattern, n, e, binding):
                witnesses += 1
                if witnesses >= neg.var.min:
                    return False
    return True


def negation_filter(pattern: Pattern, matches: list[Match], events: list[Event]) -> list[Match]:
    if not pattern.negations:
        return matches
    return [m for m in matches if negation_holds(pattern, m, events)]


# --------------------------------------------------------------------------------------
# SES paper, Algorithms 1-2, transcribed
# --------------------------------------------------------------------------------------
def _transitions(pattern: Pattern, state: frozenset[str], buffer: list
                 ) -> list[tuple[Variable, bool]]:
    """Outgoing transitions of a state of the concatenated SES automaton (section 4.2):
    ``(variable bound, starts a new set?)``. A state is the set of bound variables; a
    group variable's loop stops at its maximum (Kleene bounds)."""
    if not state:
        return [(v, False) for v in pattern.sets[0]]
    current = max(pattern.by_name[n].set_index for n in state)
    count = defaultdict(int)
    for name, _ in buffer:
        count[name] += 1
    out = [(v, False) for v in pattern.sets[current] if v.name not in state or (
        v.group and (v.max is None or count[v.name] < v.max))]
    if current + 1 < len(pattern.sets) and all(v.name in state for v in pattern.sets[current]):
        out.extend((v, True) for v in pattern.sets[current + 1])
    return out


def _theta_delta_holds(pattern: Pattern, var: Variable, new_set: bool,
                       buffer: list[tuple[str, Event]]) -> bool:
    """Θδ instantiated with β' (all of it), for the transition that bound ``var``."""
    bound: dict[str, list[Event]] = defaultdict(list)
    for name, e in buffer:
        bound[name].append(e)
    mine = bound[var.name]
    for prop in pattern.properties[var.name]:
        if not all(prop.holds(e.values) for e in mine):
            return False
    for prev in pattern.declared_prev_relationships[var.name]:
        if not all(prev.holds(a.values, b.values) for a, b in zip(mine, mine[1:])):
            return False
    for r in pattern.running_conditions[var.name]:  # each event against all before it
        if not all(r.holds([x.values for x in mine[:i]], mine[i].values)
                   for i in range(1, len(mine))):
            return False
    for rel in pattern.relationships + pattern.equality_closure:
        if var.name in rel.variables:
            x, y = rel.variables
            other = y if x == var.name else x
            if other in bound:
                for a, b in rel.pairs(bound[x], bound[y]):
                    if not rel.holds(a.values, b.values):
                        return False
    if new_set:  # concatenation: v'.T < v.T for every v' of the preceding sets
        for name, e in buffer:
            if pattern.by_name[name].set_index < var.set_index and not e.ts < mine[-1].ts:
                return False
    return True


def _consume(pattern: Pattern, state: frozenset[str], buffer: list, e: Event,
             pos: dict[int, int] | None = None, ranks: dict | None = None):
    """Algorithm 2, ConsumeEvent; with contiguity (``pos``) a transition fires only on
    the event right after the instance's last bound event."""
    out = []
    if pattern.contiguity != "none" and buffer and \
            pos.get(e.seq) != pos.get(buffer[-1][1].seq, -2) + 1:
        return [(state, buffer)]
    for var, new_set in _transitions(pattern, state, buffer):
        if new_set and var.set_index in pattern.next_sets and \
                pos.get(e.seq) != pos.get(buffer[-1][1].seq, -2) + 1:
            continue  # a [next b] step: the very next event after the set before
        buffer2 = buffer + [(var.name, e)]
        if ranks and var.name in ranks and not consecutive_hold(
                pattern, {var.name: [x for n, x in buffer2 if n == var.name][-2:]},
                {var.name: ranks[var.name]}):
            continue  # a consecutive group skips no event that fits it
        if _theta_delta_holds(pattern, var, new_set, buffer2):
            out.append((state | {var.name}, buffer2))
    if not out and state:
        out = [(state, buffer)]
    return out


def ses_exec(pattern: Pattern, events: list[Event], stats: dict | None = None) -> list[Match]:
    """Algorithm 1, SESExec, over ``events`` in processing order; accepting instances still
    alive at the end of the input are matches too (their window closed with the input)."""
    if pattern.optional_units:
        return select_episodes(pattern, optional_matches(
            pattern, events, lambda p, ev: ses_exec(p, ev, stats), maximal=True))
    final = frozenset(v.name for v in pattern.variables)
    results: dict[tuple, Match] = {}
    omega: list[tuple[frozenset[str], list]] = []
    peak = 0

    pos = positions(pattern, events) if pattern.position_rule is not None else None
    ranks = consecutive_ranks(pattern, events)

    def emit(buffer):
        binding: dict[str, list[Event]] = defaultdict(list)
        for name, ev in buffer:
            binding[name].append(ev)
        if any(len(binding[v.name]) < v.min for v in pattern.variables):
            return  # fewer events than a variable's minimum: no match
        m = make_match(pattern, binding)
        results[m.key] = m

    for e in events:
        omega.append((frozenset(), []))
        nxt = []
        for state, buffer in omega:
            if buffer and max(abs(e.ts - b.ts) for _, b in buffer) > pattern.tau:
                if state == final:
                    emit(buffer)
            else:
                nxt.extend(_consume(pattern, state, buffer, e, pos, ranks))
        omega = nxt
        peak = max(peak, len(omega))
    for state, buffer in omega:
        if state == final:
            emit(buffer)
    if stats is not None:
        stats["max_instances"] = max(stats.get("max_instances", 0), peak)
    kept = [m for m in results.values() if aggregates_hold(pattern, dict(m.bindings))]
    return select_episodes(pattern, negation_filter(pattern, kept, events))


# --------------------------------------------------------------------------------------
# SES paper, Definition 2 (conditions 1-5) within one partition
# --------------------------------------------------------------------------------------
def partitions(pattern: Pattern, events: list[Event]) -> dict[tuple, list[Event]]:
    """Events grouped by their values of the partition attributes X (Def. 6)."""
    groups: dict[tuple, list[Event]] = defaultdict(list)
    for e in events:
        groups[tuple(e.values.get(a) for a in pattern.partition_attributes)].append(e)
    return groups


def ses_definition(pattern: Pattern, events: list[Event]) -> list[Match]:
    """Matching substitutions of the SES paper's Def. 2, conditions 1-5, per partition.

    Condition 4 (skip-till-next-match): for bindings v/e and v'/e' with e.T < e'.T, no
    event e'' with e.T < e''.T < e'.T is bound to v' in any match of the partition unless it
    is bound to v' here. Condition 5: no match with the same first event strictly contains
    this one.
    """
    out: list[Match] = []
    for part in partitions(pattern, events).values():
        gamma = all_matches(pattern, part)
        bindable: dict[str, set[Event]] = defaultdict(set)
        as_sets = []
        for m in gamma:
            pairs = {(v, e.seq) for v, es in m.bindings for e in es}
            as_sets.append(pairs)
            for v, es in m.bindings:
                bindable[v].update(es)
        for m, pairs in zip(gamma, as_sets):
            flat = [(v, e) for v, es in m.bindings for e in es]
            ok = True
            for _, e in flat:
                for v2, e2 in flat:
                    if not e.ts < e2.ts:
                        continue
                    if any(e.ts < x.ts < e2.ts and (v2, x.seq) not in pairs for x in bindable[v2]):
                        ok = False
                        break
                if not ok:
                    break
            if ok:
                start = m.start.seq
                ok = not any(o.start.seq == start and pairs < opairs
                             for o, opairs in zip(gamma, as_sets))
            if ok:
                out.append(m)
    return out

