"""SQL models: the dbt half of the pipeline (docs/models.md).

A model is ``models/<name>.sql`` (one Spark SQL query over the views of ``query``: the
published ``matches_<pattern>``, ``events_<source>``, the reference tables of
``conf/reference/*.csv`` as ``reference_<name>``, and other models as ``models_<name>``)
with a sidecar ``models/<name>.yaml``: its description, its tests and, optionally,
dependencies the SQL does not name. Models run after publish, in dependency order; each
is computed, tested (Great Expectations, like dbt's generic tests: not_null, unique,
accepted_values, row_count) and only then written as the Delta table ``models/<name>``,
replacing the previous version in one commit. A failing model keeps its previous
version, and the models that depend on it are skipped.

Listing the models and their dependencies reads only files (the Airflow DAG does it when
it is parsed); running them needs Spark.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import yaml

from jobs.config import current_project
from jobs.config.strict import document, twice
from jobs.core.errors import UserError
from jobs.core.inputs import refusal
from jobs.core.language.pattern import NAME

TESTS = ("not_null", "unique", "accepted_values", "row_count")


class ModelError(UserError, ValueError):
    """A model file that cannot run; the message names the file and what is wrong."""


@dataclass(frozen=True)
class Model:
    name: str
    sql: str
    path: Path
    description: str = ""
    tests: tuple[dict, ...] = ()
    depends_on: tuple[str, ...] = field(default=())  # other models

    @property
    def tables(self) -> tuple[str, ...]:
        """The views the SQL reads (matches_*, events_*, reference_*, models_*)."""
        return tables_read(self.sql)


def tables_read(sql: str) -> tuple[str, ...]:
    """The views a model's SQL names (matches_*, events_*, reference_*, models_*)."""
    found = re.findall(r"\b((?:matches|events|reference|models)_[a-z0-9_]+)\b",
                       _code(sql).lower())
    return tuple(dict.fromkeys(found))


def _code(sql: str) -> str:
    """The SQL without comments and string literals (names in them are not tables)."""
    sql = re.sub(r"--[^\n]*", " ", sql)
    sql = re.sub(r"/\*.*?\*/", " ", sql, flags=re.S)
    return re.sub(r"'(?:[^']|'')*'", "''", sql)


def statement_kind(sql: str) -> str | None:
    """None when ``sql`` is one query by a real SQL parser (sqlglot, Spark's dialect), else
    what it is (``an INSERT statement``, ``2 statements``, ``SQL that does not parse: …``).
    The check every model gets when it is loaded, without Spark; the build checks again
    with Spark's own parser before it runs anything (``jobs.spark.sql``)."""
    import logging

    import sqlglot
    from sqlglot import exp

    logging.getLogger("sqlglot").setLevel(logging.ERROR)  # its "falling back" notes
    try:
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None]
    except sqlglot.errors.SqlglotError as exc:
        why = (str(exc).strip().splitlines() or ["a parse error"])[0][:200]
        try:  # name the statement by its first token, as the tokenizer reads it
            token = sqlglot.tokenize(sql, read="spark")[0]
            lead, kind = token.token_type.name, token.text.upper()
        except (sqlglot.errors.SqlglotError, IndexError):
            lead = kind = ""
        if lead and lead not in ("SELECT", "WITH", "VALUES", "FROM", "L_PAREN", "TABLE"):
            return f"{'an' if kind[:1] in 'AEIOU' else 'a'} {kind} statement ({why})"
        return f"SQL that does not parse as a query ({why})"
    if len(statements) != 1:
        return f"{len(statements)} statements"
    s = statements[0]
    if isinstance(s, (exp.Query, exp.Values)):
        return None
    kind = str(s.this).upper() if isinstance(s, exp.Command) else s.key.upper()
    return f"{'an' if kind[:1] in 'AEIOU' else 'a'} {kind} statement"


def load_model(sql_path: Path) -> Model:
    name = sql_path.stem
    where = str(sql_path)
    if not NAME.fullmatch(name):
        raise ModelError(f"{where}: a model name is lower case letters, digits and _")
    for f in (sql_path, sql_path.with_suffix(".yaml")):
        refused = refusal(f)
        if refused:
            raise ModelError(f"{f}: the file {refused}")
    sql = sql_path.read_text(encoding="utf-8").strip().rstrip(";")
    if not sql:
        raise ModelError(f"{where}: empty model")
    kind = statement_kind(sql)
    if kind is not None:
        raise ModelError(f"{where}: a model is one query (SELECT or WITH; one query per "
                         f"model), but this is {kind}: it is not run; the model build writes "
                         f"the query's rows to models/{name} itself")
    side = sql_path.with_suffix(".yaml")
    meta = {}
    if side.exists():
        try:
            node, meta = document(side.read_text(encoding="utf-8"))
            doubled = twice(side, node)
            if doubled:
                raise ModelError("\n".join(doubled))
            meta = meta or {}
        except yaml.YAMLError as exc:
            raise ModelError(f"{side}: not valid YAML: {exc}") from None
        if not isinstance(meta, dict):
            raise ModelError(f"{side}: a mapping of description, tests, depends_on")
        unknown = set(meta) - {"description", "tests", "depends_on"}
        if unknown:
            raise ModelError(f"{side}: unknown key(s) {sorted(unknown)} (allowed: "
                             "description, tests, depends_on)")
    tests = tuple(_check_test(t, side, i) for i, t in enumerate(meta.get("tests") or [], 1))
    deps = meta.get("depends_on") or []
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise ModelError(f"{side}: depends_on is a list of model names")
    model = Model(name, sql, sql_path, str(meta.get("description") or ""), tests)
    implied = [t[len("models_"):] for t in model.tables if t.startswith("models_")]
    return Model(name, sql, sql_path, model.description, tests,
                 tuple(dict.fromkeys([*implied, *deps])))


def _check_test(test, side: Path, i: int) -> dict:
    if not isinstance(test, dict) or len(test) != 1 or next(iter(test)) not in TESTS:
        raise ModelError(f"{side}: test {i} must be one of {', '.join(TESTS)}, e.g. "
                         "{not_null: [person]}")
    kind, arg = next(iter(test.items()))
    ok = {"not_null": lambda a: isinstance(a, list) and a,
          "unique": lambda a: isinstance(a, list) and a,
          "accepted_values": lambda a: isinstance(a, dict) and {"column", "values"} <= set(a),
          "row_count": lambda a: isinstance(a, dict) and set(a) <= {"min", "max"} and a}[kind]
    if not ok(arg):
        raise ModelError(f"{side}: test {i} ({kind}): " + {
            "not_null": "a list of columns", "unique": "a list of columns (together unique)",
            "accepted_values": "{column: c, values: [...]}",
            "row_count": "{min: n, max: n}"}[kind])
    return test


def models_folder() -> Path:
    """``models/``, or the folder named by SES_MODELS (relative to the project)."""
    return current_project().models


def load_models(folder: Path | None = None, select: list[str] | None = None) -> list[Model]:
    """Every model of ``folder`` in dependency order (``select``: only these). Raises
    ``ModelError`` for an unknown dependency or a cycle."""
    folder = folder or models_folder()
    models = {m.name: m for m in (load_model(p) for p in sorted(folder.glob("*.sql")))}
    for m in models.values():
        for d in m.depends_on:
            if d not in models:
                raise ModelError(f"{m.path}: depends on model {d!r}, which does not exist "
                                 f"(models: {', '.join(sorted(models)) or 'none'})")
    try:
        order = list(TopologicalSorter({m.name: m.depends_on for m in models.values()})
                     .static_order())
    except CycleError as exc:
        raise ModelError(f"models depend on each other in a cycle: "
                         f"{' -> '.join(exc.args[1])}") from None
    if select:
        unknown = set(select) - set(models)
        if unknown:
            raise ModelError(f"no model {sorted(unknown)} in {folder}")
        order = [n for n in order if n in select]
    return [models[n] for n in order]


def expectations(model: Model) -> list[dict]:
    """The model's tests as Great Expectations expectations."""
    out = []
    for test in model.tests:
        kind, arg = next(iter(test.items()))
        if kind == "not_null":
            out += [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": c}}
                    for c in arg]
        elif kind == "unique":
            out.append({"type": "expect_column_values_to_be_unique", "kwargs": {"column": arg[0]}}
                       if len(arg) == 1 else
                       {"type": "expect_compound_columns_to_be_unique",
                        "kwargs": {"column_list": list(arg)}})
        elif kind == "accepted_values":
            out.append({"type": "expect_column_values_to_be_in_set",
                        "kwargs": {"column": arg["column"], "value_set": list(arg["values"])}})
        else:
            out.append({"type": "expect_table_row_count_to_be_between",
                        "kwargs": {"min_value": arg.get("min"), "max_value": arg.get("max")}})
    return out


