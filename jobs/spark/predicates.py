"""A pattern as Spark predicates (Theorem 1's filter, pushed into the Parquet scan), and the
events of a run's range read with partition pruning on ``event_date``. Phase 1, the
planner's sample, the quality checks and ``explain`` all build their Spark filters here,
so a condition means the same on Spark as in the matcher (SQL's three-valued logic)."""

from __future__ import annotations

from functools import reduce

from jobs.core.language.conditions.expressions import (
    Attr,
    Cmp,
    Expr,
    In,
    Lit,
    Neg,
    Not,
    is_fact,
    stored,
    time_function,
)
from jobs.core.language.conditions.kinds import Property
from jobs.core.language.events import format_ts, to_datetime
from jobs.core.language.pattern import Disjunction, Pattern
from jobs.core.language.window import current_attributes, relevance
from jobs.lake import store as lk
from jobs.spark.tables import read_spark


def col(name: str):
    from pyspark.sql import functions as F

    return F.col(f"`{name}`")


def _value_column(e: Expr):
    from pyspark.sql import functions as F

    if isinstance(e, Lit):
        return F.lit(e.value)
    if isinstance(e, Attr):
        func = time_function(e.attr)
        return col(e.attr) if func is None else time_function_column(func, col(stored(e.attr)))
    if isinstance(e, Neg):
        return -_value_column(e.item).cast("double")
    left, right = _value_column(e.left).cast("double"), _value_column(e.right).cast("double")
    if e.op == "/":
        return F.try_divide(left, right)
    return {"+": left + right, "-": left - right, "*": left * right}[e.op]


def time_function_column(func: str, ts):
    """``expressions.derive`` as a Spark column over a timestamp column, on its
    microseconds since the epoch (UTC whatever the session's time zone)."""
    from pyspark.sql import functions as F

    micros = F.unix_micros(ts)
    day, hour = F.lit(86_400_000_000), F.lit(3_600_000_000)
    if func == "date":
        return F.timestamp_micros(micros - F.pmod(micros, day))
    if func == "hour":
        return F.pmod(F.floor(micros / hour), F.lit(24))
    return F.pmod(F.floor(micros / day) + 3, F.lit(7)) + 1


def _built_once(key: str, build):
    """A Spark column built once per Spark context and ``key``: each costs py4j round
    trips (about 20 ms for a pattern's filter), and a night of many patterns builds the
    same conditions again and again (its variations of one pattern, the late events, the
    variable counts, the passes). A column is an immutable expression: reusing it in
    several frames is safe."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None:
        return build()
    built = sc.__dict__.setdefault("_ses_columns", {})
    if key not in built:
        if len(built) >= 4096:  # a bound for long-lived processes
            built.clear()
        built[key] = build()
    return built[key]


def condition_column(e: Expr):
    """A property as a Spark predicate, in SQL's three-valued logic as in the matcher (a
    row is kept when the predicate is true; division by zero is null, not an error)."""
    return _built_once(f"condition {e!r}", lambda: _condition_column(e))


def _condition_column(e: Expr):
    if isinstance(e, Cmp):
        left, right = _value_column(e.left), _value_column(e.right)
        return {"=": left == right, "!=": left != right, "<": left < right,
                "<=": left <= right, ">": left > right, ">=": left >= right}[e.op]
    if isinstance(e, In):
        found = _value_column(e.item).isin([v.value for v in e.values])
        return ~found if e.negated else found
    if isinstance(e, Not):
        return ~condition_column(e.item)
    parts = [condition_column(x) for x in e.items]
    return reduce(lambda a, b: (a & b) if e.op == "and" else (a | b), parts)


def property_column(p: Property):
    """One property as a Spark predicate; null compares false, as in the matcher. A
    property on a partition fact (no column: the marks compute it) holds for every event
    here: what reads it keeps a superset, and the matcher tests it."""
    if any(is_fact(a) for a in p.attributes):
        from pyspark.sql import functions as F

        return F.lit(True)
    return condition_column(p.expr)


def window_filter_column(pattern):
    """The events that can affect a window (``window.relevance``) as a Spark predicate:
    each comparison that reads only the event gives its three truth values (true, false,
    null); None when every event counts (``iter()``)."""
    from pyspark.sql import functions as F

    if pattern.uses_iter:
        return None
    return _built_once(f"window {sorted(pattern.conditions.items())!r}", lambda: F.coalesce(
        relevance(pattern, *window_analysis()), F.lit(False)))


def window_analysis():
    """The Spark-column builders of ``window.possible``."""
    from pyspark.sql import functions as F

    def leaf(e):
        c = condition_column(e)
        return F.coalesce(c, F.lit(False)), F.coalesce(~c, F.lit(False)), c.isNull()

    def present(e):
        return reduce(lambda a, b: a & b, [col(a).isNotNull() for a in current_attributes(e)],
                      F.lit(True))

    return (leaf, F.lit, lambda xs: reduce(lambda a, b: a & b, xs),
            lambda xs: reduce(lambda a, b: a | b, xs), present)


def filter_column(pattern: Pattern | Disjunction):
    """Theorem 1: OR over the variables (negated ones too: their witnesses must reach
    phase 2; of every alternative of a disjunction) of the AND of their properties; None
    when some variable has no property (every event could fit it). For a window pattern,
    the events that can affect a window."""
    from pyspark.sql import functions as F

    if pattern.kind == "window":
        return window_filter_column(pattern)
    variables = [alt.properties[v.name] for alt in pattern.alternatives
                 for v in alt.variables + alt.negated] + [
        h.where for alt in pattern.alternatives for h in getattr(alt, "history", ())]
    if not all(variables):
        return None

    def build():
        terms = [reduce(lambda a, b: a & b, map(property_column, props)) for props in variables]
        return F.coalesce(reduce(lambda a, b: a | b, terms), F.lit(False))
    return _built_once(f"filter {[[p.expr for p in props] for props in variables]!r}", build)


def tag_column(conditions: list):
    """One bit per condition, summed into a long: bit i is set where condition i holds
    (None: everywhere; a null condition does not hold). What a source pass tags each
    event with (the patterns it serves), at most 63 conditions."""
    from pyspark.sql import functions as F

    zero = F.lit(0).cast("long")
    tags: dict[int, int] = {}  # one test per distinct condition (``_built_once`` shares them)
    for i, c in enumerate(conditions):
        tags[id(c)] = tags.get(id(c), 0) | (1 << i)
    by_id = {id(c): c for c in conditions}
    bits = [F.lit(tag).cast("long") if by_id[key] is None else
            F.when(by_id[key], F.lit(tag).cast("long")).otherwise(zero)
            for key, tag in tags.items()]
    return reduce(lambda a, b: a + b, bits)


def any_of(conditions: list):
    """Whether some condition holds (a null one does not), each distinct one tested once;
    None when one is None (every event)."""
    from pyspark.sql import functions as F

    if any(c is None for c in conditions):
        return None
    distinct = list({id(c): c for c in conditions}.values())
    return F.coalesce(reduce(lambda a, b: a | b, distinct), F.lit(False))


def has_tag(column: str, i: int):
    """Whether bit ``i`` of a ``tag_column`` is set."""
    from pyspark.sql import functions as F

    return F.col(column).bitwiseAND(1 << i) != 0


def ts_in(low: int | None, high: int | None):
    """``ts`` in [low, high) (None: open; both None: None, every event)."""
    from pyspark.sql import functions as F

    terms = ([F.col("ts") >= F.lit(to_datetime(low))] if low is not None else []) + \
        ([F.col("ts") < F.lit(to_datetime(high))] if high is not None else [])
    return reduce(lambda a, b: a & b, terms) if terms else None


# the events a night's job reads from which pruning partitions before the shuffle pays
# (below it the semi join's own stage costs more than the rows it spares; phase 2 prunes
# the same partitions either way)
PRUNE_BEFORE_SHUFFLE = 1_000_000


def starting_partitions(df, keys: list[str], starts: list, events: int):
    """The rows of ``df`` in the partitions (values of ``keys``) holding a row where one
    of ``starts`` holds (a row able to start a match of a start range; None: every
    row, no pruning): a left semi join with those partitions' keys. A match starts at an
    event of its partition, so the other partitions, read only for the τ before a start
    range, cannot give one. Phase 2 prunes alike (``phase2.starting``), so this only
    spares the shuffle: done when the job reads ``events`` >= ``PRUNE_BEFORE_SHUFFLE``."""
    if not keys or not starts or any(s is None for s in starts) \
            or events < PRUNE_BEFORE_SHUFFLE:
        return df
    hit = reduce(lambda a, b: a | b, starts)
    found = df.where(hit).select(*[col(k) for k in keys]).distinct()
    return df.join(found, on=keys, how="left_semi")


def event_date_filters(low: int | None, high: int | None, tau: int) -> list | None:
    """The ``event_date`` partitions that hold events with ts in [low, high + τ]."""
    filters = []
    if low is not None:
        filters.append(("event_date", ">=", format_ts(low)[:10]))
    if high is not None:
        filters.append(("event_date", "<=", format_ts(high + tau)[:10]))
    return filters or None


def read_range(spark, lake: lk.Lake, path: str, low: int | None, high: int | None, tau: int):
    """The events with ts in [low, high + τ] (None: unbounded), reading only the
    ``event_date`` partitions that can hold them."""
    from pyspark.sql import functions as F

    df = read_spark(spark, lake, path, event_date_filters(low, high, tau))
    if low is not None:
        df = df.where(F.col("ts") >= F.lit(to_datetime(low)))
    if high is not None:
        df = df.where(F.col("ts") <= F.lit(to_datetime(high + tau)))
    return df
