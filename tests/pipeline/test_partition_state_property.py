"""The partition state against the reference, over random histories cut into random
nights: after each night, the marks phase 1 computes from the merged state (on Spark)
equal the reference's marks over every event seen so far, the facts equal the whole
history's, and every earlier event whose mark changed lies where the night reopens its
partition (at or after its low plus τ)."""

import json
import textwrap
from datetime import datetime, timezone

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jobs.core.language.events import Event, order
from jobs.core.language.history import mark
from jobs.core.language.pattern import history_attribute
from jobs.core.language.patternfile import parse_pattern
from jobs.pipeline.match.partition_state import (
    FACTS,
    HistoryPlan,
    _merge,
    mark_columns,
    state_schema,
)

DAY = 86400 * 10**9
START = int(datetime(2024, 1, 1, tzinfo=timezone.utc).timestamp()) * 10**9


def _pattern(direction: str, bound: str, k: int, by: int, where: str | None):
    cond = f"{{{bound}: {k}, {direction}: a" + (f", by: {by}d" if by else "") + (
        f", where: \"h.type = '{where}'\"" if where else "") + "}"
    return parse_pattern(textwrap.dedent(f"""\
        name: prop
        source: s
        within: 2d
        sets:
          - [a]
          - [b]
        conditions:
          - a.type = 'A'
          - b.type = 'B'
          - a.patient = b.patient
        history:
          - {cond}
    """), "<prop>")


def _table(rows: list[dict]) -> pa.Table:
    return pa.table({
        "event_id": pa.array([r["id"] for r in rows], pa.string()),
        "ts": pa.array([r["ts"] // 1000 for r in rows], pa.timestamp("us", tz="UTC")),
        "ingested_at": pa.array([r["night"] * 1000 for r in rows], pa.timestamp("us", tz="UTC")),
        "patient": pa.array([r["patient"] for r in rows], pa.int64()),
        "type": pa.array([r["type"] for r in rows], pa.string())})


events_strategy = st.lists(st.tuples(st.integers(1, 3), st.sampled_from("ABC"),
                                     st.integers(0, 40 * 24), st.integers(0, 5)),
                           min_size=1, max_size=40)


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=events_strategy, direction=st.sampled_from(["before", "after"]),
       bound=st.sampled_from(["at_least", "at_most"]), k=st.integers(0, 2),
       by=st.sampled_from([0, 1, 3]), where=st.sampled_from([None, "A", "C"]))
def test_state_marks_and_reopening_equal_the_reference(spark, raw, direction, bound, k, by,
                                                       where):
    if bound == "at_least" and k == 0:
        k = 1
    pattern = _pattern(direction, bound, k, by, where)
    tau = pattern.tau
    rows = [{"id": f"e{n}", "patient": p, "type": t, "ts": START + hours * 3600 * 10**9,
             "night": night} for n, (p, t, hours, night) in enumerate(raw)]
    state: dict = {}
    before: dict[str, bool] = {}
    schema = state_schema(pattern, {"patient": pa.int64()})
    for night in sorted({r["night"] for r in rows}):
        plan = HistoryPlan()
        _merge(pattern, state, _table([r for r in rows if r["night"] == night]), plan)
        seen = [r for r in rows if r["night"] <= night]
        reference = {e.id: bool(e.attrs[history_attribute(0)]) for e in mark(pattern, order(
            Event(r["id"], r["ts"], {"patient": r["patient"], "type": r["type"]})
            for r in seen))}
        frame = spark.createDataFrame(_table(seen).to_pandas())
        got = {r["event_id"]: r[history_attribute(0)] for r in mark_columns(
            spark, frame, pattern, pa.Table.from_pylist(list(state.values()), schema)).collect()}
        assert got == reference, night
        for r in seen:
            if r["id"] in before and before[r["id"]] != reference[r["id"]]:
                low = plan.lows.get(json.dumps([r["patient"]]))
                assert low is not None and low + tau <= r["ts"], (night, r)
        before = reference
        for p in {r["patient"] for r in seen}:
            mine = [r["ts"] for r in seen if r["patient"] == p]
            fact = state[(FACTS, json.dumps([p]))]
            assert (fact["first_ts"], fact["last_ts"], fact["count"]) == (
                min(mine), max(mine), len(mine))
