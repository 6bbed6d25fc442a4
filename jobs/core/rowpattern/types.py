"""The type of each measure, known before any row is matched, so that a match table has
typed columns: from the source's column types and the expression (SQL's rules: an
aggregate's type follows its argument's, ``count`` is bigint, ``avg`` double, a comparison
boolean, ``||`` varchar, arithmetic on bigints bigint and otherwise double). Types are
written as Spark's simple strings: ``string``, ``bigint``, ``double``, ``boolean``,
``timestamp``, ``array<T>``; an interval is a ``double`` of seconds."""

from __future__ import annotations

from jobs.core.rowpattern.model import (
    Agg,
    Between,
    Binary,
    Case,
    Cast,
    Classifier,
    Col,
    Func,
    InList,
    IsNull,
    Like,
    Lit,
    MatchNumber,
    Nav,
    Unary,
)
from jobs.core.rowpattern.values import Interval, Ts

STRING, BIGINT, DOUBLE, BOOLEAN, TIMESTAMP = "string", "bigint", "double", "boolean", "timestamp"
INTERVAL = "interval"  # only inside an expression: a measure of it is a double of seconds
_SPARK = {"string": STRING, "varchar": STRING, "char": STRING, "bigint": BIGINT,
          "int": BIGINT, "integer": BIGINT, "long": BIGINT, "smallint": BIGINT,
          "tinyint": BIGINT, "double": DOUBLE, "float": DOUBLE, "real": DOUBLE,
          "decimal": DOUBLE, "boolean": BOOLEAN, "timestamp": TIMESTAMP,
          "timestamp_ntz": TIMESTAMP, "date": TIMESTAMP}
_CAST = {"VARCHAR": STRING, "CHAR": STRING, "INTEGER": BIGINT, "INT": BIGINT,
         "BIGINT": BIGINT, "SMALLINT": BIGINT, "TINYINT": BIGINT, "DOUBLE": DOUBLE,
         "REAL": DOUBLE, "DECIMAL": DOUBLE, "BOOLEAN": BOOLEAN}


def simple_type(name: str) -> str:
    """A column's type (Spark's ``simpleString`` or conf/sources.yaml's) in these terms."""
    base = name.lower().split("(")[0]
    return _SPARK.get(base, STRING)


def measure_type(e, columns: dict[str, str]) -> str:
    """The type of expression ``e``; ``columns``: column name (lower case) -> type."""
    t = type(e)
    if t is Lit:
        v = e.value
        if isinstance(v, bool):
            return BOOLEAN
        if isinstance(v, Ts):
            return TIMESTAMP
        if isinstance(v, Interval):
            return INTERVAL
        if isinstance(v, int):
            return BIGINT
        return DOUBLE if isinstance(v, float) else STRING
    if t is Col:
        return columns.get(e.name.lower(), STRING)
    if t is Classifier:
        return STRING
    if t is MatchNumber:
        return BIGINT
    if t is Nav:
        return measure_type(e.arg, columns)
    if t is Agg:
        return _aggregate(e, columns)
    if t in (IsNull, Between, InList, Like):
        return BOOLEAN
    if t is Unary:
        return BOOLEAN if e.op == "NOT" else measure_type(e.arg, columns)
    if t is Binary:
        return _binary(e, columns)
    if t is Case:
        for _, result in e.whens:
            if not (isinstance(result, Lit) and result.value is None):
                return measure_type(result, columns)
        return STRING if e.default is None else measure_type(e.default, columns)
    if t is Cast:
        return _CAST[e.type]
    if t is Func:
        return _function(e, columns)
    return STRING


def _aggregate(e: Agg, columns) -> str:
    if e.name in ("count", "count_if"):
        return BIGINT
    if e.name == "avg":
        return DOUBLE
    if e.name in ("bool_and", "bool_or", "every"):
        return BOOLEAN
    arg = measure_type(e.arg, columns)
    if e.name == "array_agg":
        return f"array<{arg}>"
    if e.name == "sum":
        return BIGINT if arg == BIGINT else DOUBLE
    return arg


def _binary(e: Binary, columns) -> str:
    if e.op in ("AND", "OR", "=", "<>", "<", "<=", ">", ">="):
        return BOOLEAN
    if e.op == "||":
        return STRING
    a, b = measure_type(e.left, columns), measure_type(e.right, columns)
    if TIMESTAMP in (a, b):
        return INTERVAL if a == b == TIMESTAMP else TIMESTAMP
    if a == b == INTERVAL:
        return INTERVAL
    return BIGINT if a == b == BIGINT else DOUBLE


def _function(e: Func, columns) -> str:
    first = measure_type(e.args[0], columns) if e.args else STRING
    if e.name in ("lower", "upper", "trim", "substr", "substring", "concat", "concat_ws"):
        return STRING
    if e.name in ("length", "cardinality", "sign"):
        return BIGINT
    if e.name in ("sqrt", "power"):
        return DOUBLE
    if e.name == "array":
        return f"array<{first}>"
    if e.name == "if":
        return measure_type(e.args[1], columns) if len(e.args) > 1 else STRING
    return first  # coalesce, nullif, greatest, least, abs, round, floor, ceil, mod


def output_type(t: str) -> str:
    """A measure's column type: an interval is stored as a double of seconds."""
    if t == INTERVAL:
        return DOUBLE
    if t.startswith("array<"):
        return f"array<{output_type(t[6:-1])}>"
    return t
