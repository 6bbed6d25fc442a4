"""``after_match`` on a call's matches (``engine.episodes``): the vectorised preference
order and walk keep exactly the matches the definition's walk keeps (sort every match by
(partition, first event, longer first, last event, each variable's rows, index), then
keep each whose first event is past the last kept one's bound), on batches full of ties."""

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.core.engine.batches import MatchBatch
from jobs.core.engine.episodes import kept_episodes

RULES = ["past_last_event", "to_next_event", "to_first a", "to_last a", "to_first b",
         "to_last b"]


def _definition(rule: str, codes, batch: MatchBatch, names, begin) -> list[int]:
    words = rule.split()
    keys = []
    for k in range(len(batch)):
        a, b = batch.offsets[k], batch.offsets[k + 1]
        rows, variables = batch.rows[a:b], batch.variables[a:b]
        per_var = tuple(tuple(rows[variables == v].tolist()) for v in range(len(names)))
        keys.append((int(codes[batch.first[k]]), int(batch.first[k]), -(b - a),
                     int(rows.max()), per_var, k))
    out, partition, after, at_least = [], None, -1, -1
    for part, first, _, end, per_var, k in sorted(keys):
        if begin is not None and first < begin[first]:
            continue
        if part != partition:
            partition, after, at_least = part, -1, -1
        if not (first > after and first >= at_least):
            continue
        out.append(k)
        if rule == "past_last_event":
            after = end
        else:
            after = first
            if len(words) == 2 and per_var[names.index(words[1])]:
                bound = per_var[names.index(words[1])]
                at_least = bound[0] if words[0] == "to_first" else bound[-1]
    return out


@st.composite
def batches(draw):
    events = draw(st.integers(3, 12))
    codes = np.array(draw(st.lists(st.integers(-1, 2), min_size=events, max_size=events)))
    n = draw(st.integers(0, 40))
    first, offsets, rows, variables = [], [0], [], []
    for _ in range(n):
        start = draw(st.integers(0, events - 2))
        more = draw(st.lists(st.integers(start + 1, events - 1), min_size=1, max_size=3))
        bound = [start] + more
        first.append(start)
        rows += bound
        variables += [0] + draw(st.lists(st.integers(0, 2), min_size=len(more),
                                         max_size=len(more)))
        offsets.append(len(rows))
    batch = MatchBatch(np.array(first, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64),
                       np.array(offsets, np.int64), np.array(rows, np.int64),
                       np.array(variables, np.int64))
    begin = np.array(draw(st.lists(st.integers(0, events), min_size=events, max_size=events))) \
        if draw(st.booleans()) else None
    return codes, batch, draw(st.sampled_from(RULES)), begin


@settings(max_examples=300, deadline=None)
@given(batches())
def test_kept_episodes_equal_the_definitions_walk(case):
    codes, batch, rule, begin = case
    names = ["s", "a", "b"]
    c = SimpleNamespace(pattern=SimpleNamespace(after_match=rule, variables=[
        SimpleNamespace(name=n) for n in names]),
        partition_codes=lambda cols: (np.maximum(codes, 0), codes >= 0))
    got = kept_episodes(c, None, batch, begin).tolist()
    assert got == _definition(rule, np.where(codes >= 0, codes, -1), batch, names, begin)
