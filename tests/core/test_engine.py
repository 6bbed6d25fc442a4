"""The columnar engine: batches and resumption, the column encoding, output formatting,
the typed statistics, and the local command's output equal to the oracle's, byte for byte."""

import itertools
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.cli.main import main
from jobs.core.engine.batches import MatchStats
from jobs.core.engine.columns import from_arrow, from_events
from jobs.core.engine.compiled import OPS, CompiledPattern, compare_columns
from jobs.core.engine.matchers import MATCHER_CLASSES
from jobs.core.engine.options import MatchOptions
from jobs.core.engine.output import iso_timestamps
from jobs.core.engine.runtime import compile_pattern, execute
from jobs.core.language.events import Event, format_ts, order
from jobs.core.local.runner import MatchCapExceeded, run
from jobs.core.reference import oracle

from ..helpers import EXAMPLES, ROOT, keys, pattern_text
from ..strategies import event_tables, patterns


def engine_keys(pattern, events, options, batch_size):
    c = compile_pattern(pattern)
    cols = from_events(events, c.attributes)
    names = [v.name for v in c.variables]
    found, firsts = set(), []
    for b in execute(c, cols, options, batch_size=batch_size):
        firsts.extend(b.first.tolist())
        for k in range(len(b)):
            per_var = [[] for _ in names]
            for row, var in zip(b.rows[b.offsets[k]:b.offsets[k + 1]],
                                b.variables[b.offsets[k]:b.offsets[k + 1]]):
                per_var[var].append(events[row].id)
            found.add(tuple((n, tuple(ids)) for n, ids in zip(names, per_var)))
    return found, firsts


@given(st.sampled_from(["ses", "zstream"]), st.data(), st.integers(1, 3))
def test_tiny_batches_resume_exactly(matcher, data, batch_size):
    """Output buffers of 1-3 matches force every window to stop and resume: the result is
    the oracle's, and batches come in the order of their first events."""
    pattern = data.draw(patterns(matcher=matcher, max_vars=3))
    events = data.draw(event_tables(max_events=10))
    expected = keys(oracle.ses_exec(pattern, events) if matcher == "ses"
                    else oracle.all_matches(pattern, events))
    found, firsts = engine_keys(pattern, events, MatchOptions(), batch_size)
    assert found == expected
    assert firsts == sorted(firsts)


def _matches(c, cols) -> set:
    out = set()
    for b in execute(c, cols, MatchOptions()):
        for k in range(len(b)):
            lo, hi = b.offsets[k], b.offsets[k + 1]
            out.add(tuple(zip(b.variables[lo:hi].tolist(), cols.ids.take(
                pa.array(b.rows[lo:hi])).to_pylist())))
    return out


@given(st.sampled_from(["ses", "zstream"]), st.data())
def test_patterns_on_shared_columns_match_as_alone(matcher, data):
    """Patterns matched one after the other over the same columns (a source pass reuses
    the filtered partitions of a pattern for the next one that filters alike): the same
    matches as each over its own columns; a variant with another window always reuses."""
    from dataclasses import replace

    p = data.draw(patterns(matcher=matcher, max_vars=3))
    q = data.draw(patterns(matcher=matcher, max_vars=3))
    r = replace(p, name="other_window", tau=p.tau * data.draw(st.sampled_from([2, 3])))
    events = data.draw(event_tables(max_events=10))
    attributes = tuple(sorted(set().union(*(compile_pattern(x).attributes for x in (p, q, r)))))
    shared = from_events(events, attributes)
    for x in (p, q, r, p):
        c = CompiledPattern(x, attributes)
        assert _matches(c, shared) == _matches(c, from_events(events, attributes)), x.name
    if events:
        assert any(k[0] == "group_events" for k in shared.memo)


def test_registry_feeds_cli_and_loader(capsys, tmp_path):
    assert set(MATCHER_CLASSES) == {"ses", "zstream"}
    f = tmp_path / "p.yaml"
    f.write_text("name: x\nsource: s\nwithin: 1d\nsets: [[a]]\nmatcher: nfa\n")
    assert main(["validate", str(f)]) == 1
    assert "unknown matcher 'nfa': use one of ses, zstream" in capsys.readouterr().err


@pytest.mark.parametrize("matcher", ["ses", "zstream"])
@pytest.mark.parametrize("data", ["csv", "parquet"])
def test_match_output_equals_the_oracle_byte_for_byte(capsys, tmp_path, matcher, data):
    src = open(ROOT / "patterns" / "ses_chemo_q1.yaml").read()
    p = tmp_path / "q.yaml"
    p.write_text(src.replace("matcher: ses", f"matcher: {matcher}"))
    events = EXAMPLES / "chemo_ses" / "chemo_ses.csv"
    if data == "parquet":
        import pandas as pd
        df = pd.read_csv(events)
        df["ts"] = pd.to_datetime(df.ts)
        events = tmp_path / "e.parquet"
        pq.write_table(pa.Table.from_pandas(df, preserve_index=False), events)
    assert main(["match", str(p), str(events), "--matcher", "bruteforce"]) == 0
    expected = capsys.readouterr().out
    assert main(["match", str(p), str(events)]) == 0
    assert capsys.readouterr().out == expected and expected


def test_columns_compare_like_the_matcher():
    events = order([Event("e1", 1, {"a": "b", "b": "c", "n": 2}),
                    Event("e2", 2, {"a": "c", "b": "c", "n": None}),
                    Event("e3", 3, {"a": 3, "b": "x", "n": float("nan")})])
    cols = from_events(events, ["a", "b", "n"])
    a, b, n = (cols.row(x) for x in "abn")
    eq = compare_columns(OPS["="], cols.values[a], cols.kinds[a], cols.values[b], cols.kinds[b])
    lt = compare_columns(OPS["<"], cols.values[a], cols.kinds[a], cols.values[b], cols.kinds[b])
    ne = compare_columns(OPS["!="], cols.values[a], cols.kinds[a], cols.values[b], cols.kinds[b])
    assert eq.tolist() == [False, True, False]  # strings across two columns
    assert lt.tolist() == [True, False, False]  # 'b' < 'c'; a number and a string: never <
    assert ne.tolist() == [True, False, True]  # ... but always !=
    assert cols.kinds[n].tolist() == [1, 0, 0]  # NaN is a missing value
    value, kind = cols.encode_literal("bb")  # not in the dictionary: between 'b' and 'c'
    assert compare_columns(OPS[">"], cols.values[a], cols.kinds[a], value, kind).tolist() == \
        [False, True, False]


def test_arrow_and_events_give_the_same_columns():
    table = pa.table({"event_id": ["x2", "x1", "x3"], "ts": pa.array([5, 5, 1], pa.timestamp("ns")),
                      "t": ["B", "A", None], "v": [1.5, None, 3.0]})
    cols = from_arrow(table, ["t", "v"])
    assert cols.ids.to_pylist() == ["x3", "x1", "x2"]  # processing order (ts, id)
    events = order([Event(r["event_id"], int(r["ts"].value), {"t": r["t"], "v": r["v"]})
                    for r in table.to_pandas().to_dict("records")])
    ev_cols = from_events(events, ["t", "v"])
    np.testing.assert_array_equal(cols.kinds, ev_cols.kinds)
    np.testing.assert_array_equal(np.nan_to_num(cols.values, nan=-9),
                                  np.nan_to_num(ev_cols.values, nan=-9))


@given(st.lists(st.integers(-2 * 10**18, 4 * 10**18), min_size=1, max_size=20))
def test_iso_timestamps_equal_format_ts(values):
    values += [0, 1_500_000_000_000, 1_500_000_000_123_000, 1_500_000_000_000_000_001]
    assert iso_timestamps(np.array(values)).to_pylist() == [format_ts(v) for v in values]


def test_stats_record_has_an_arrow_schema():
    schema = MatchStats.arrow_schema()
    assert schema.field("peak").type == pa.int64() and schema.field("work_item").type == pa.string()


def test_ses_cap_names_the_window():
    p = pattern_text("name: many\nsource: s\nwithin: 10d\nsets: [[a+, b+]]\nconditions:\n"
                     "  - a.type = 'A'\n  - b.type = 'A'\n")  # every event fits both: branching
    events = order([Event(f"a{i}", i, {"type": "A"}) for i in range(6)])
    assert run(p, events, MatchOptions(max_matches_per_window=1000))[0]
    with pytest.raises(MatchCapExceeded, match="more than 1 live instances in the window "
                                               "starting at event a0"):
        run(p, events, MatchOptions(max_matches_per_window=1))


def test_every_prepared_matcher_keeps_its_tables():
    c = CompiledPattern(pattern_text("name: x\nsource: s\nwithin: 1d\nsets: [[a, b], [c]]\n"
                                     "conditions:\n  - a.p = b.p\n  - b.p = c.p\n"
                                     "  - a.v < c.v\n"))
    assert c.partition_attributes == ("p",)
    assert {(i, a, op, j, b) for i, a, op, j, b in c.relationship_pairs(True)} == \
        {(0, "v", "<", 2, "v")}
    full = c.relationship_pairs(False)
    assert (0, "p", "=", 2, "p") in full  # Θ+eq closes a.p = b.p = c.p
    for (f, p_, cond) in itertools.product([True, False], repeat=3):
        assert len(run(c.pattern, [], MatchOptions(filter=f, partition=p_,
                                                   conditions=cond))[0]) == 0


@pytest.mark.parametrize("matcher", ["ses", "zstream"])
def test_ids_that_need_json_escaping(capsys, tmp_path, matcher):
    """Quotes, backslashes and non-ASCII ids take the escaping path and still equal the
    oracle's output; the match table's bindings and ids equal the per-match formulas."""
    f = tmp_path / "e.csv"
    f.write_text('event_id,ts,type,patient\n"a""1",2010-01-01,A,1\nb\\2,2010-01-02,B,1\n'
                 "é3,2010-01-03,B,1\n", encoding="utf-8")
    p = tmp_path / "p.yaml"
    p.write_text("name: esc\nsource: s\nwithin: 5d\nsets: [[a], [b]]\nconditions:\n"
                 "  - a.type = 'A'\n  - b.type = 'B'\n  - a.patient = b.patient\n"
                 f"matcher: {matcher}\n")
    assert main(["match", str(p), str(f), "--matcher", "bruteforce"]) == 0
    expected = capsys.readouterr().out
    assert main(["match", str(p), str(f)]) == 0
    assert capsys.readouterr().out == expected and '"a\\"1"' in expected
    if matcher == "zstream":  # all matches: also the one with the non-ASCII id
        assert '"\\u00e93"' in expected

    from jobs.core.engine.output import bindings_json, bindings_of, match_id, match_ids
    from jobs.core.language.events import read_events
    from jobs.core.language.patternfile import load_pattern

    pattern = load_pattern(p)
    c = compile_pattern(pattern)
    events = read_events(f)
    cols = from_events(events, c.attributes)
    names = [v.name for v in c.variables]
    (batch,) = list(execute(c, cols))
    b = bindings_of(batch, cols, names)
    assert not b.plain
    assert match_ids(pattern.version, b) == [match_id(pattern.version, d.items())
                                             for d in b.per_match()]
    assert [json.loads(x) for x in bindings_json(b)] == b.per_match()
