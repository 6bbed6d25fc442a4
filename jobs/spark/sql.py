"""Only queries reach Spark SQL from ``query`` and the models: a statement is checked with
Spark's own parser before ``spark.sql`` sees it (``spark.sql`` runs a command, such as
``INSERT OVERWRITE DIRECTORY``, at once, before any test could look at its result).

A statement passes when Spark's grammar for a *query* reads it (``SELECT``, ``WITH``,
``VALUES``, ``TABLE``, ``FROM … SELECT``: ``ParserInterface.parseQuery``), it calls none
of the functions that reach into the JVM (``reflect``, ``java_method``) and it reads no
table by a path (``text.`/etc/passwd```, ``parquet.`<lake>/events/x```: files behind
Delta's back, retracted events included); or, for ``query``
only, when it is one of the catalogue statements an analyst needs (``SHOW``, ``DESCRIBE``,
``EXPLAIN``). Anything else is named by the class of the plan Spark parsed it into.
"""

from __future__ import annotations

from jobs.core.errors import NotAQuery, UserError

# plan classes of the read-only statements `query` runs besides queries
CATALOGUE = {"ShowTables", "ShowViews", "ShowColumns", "ShowFunctions", "ShowNamespaces",
             "ShowCatalogs", "ShowTableExtended", "ShowTableProperties", "ShowCreateTable",
             "DescribeRelation", "DescribeColumn", "DescribeFunction", "DescribeNamespace",
             "DescribeQueryCommand", "ExplainCommand"}
# functions that call arbitrary JVM methods: no query needs them
JVM_FUNCTIONS = {"reflect", "java_method", "try_reflect"}
# Spark's file sources: ``parquet.`/some/path``` reads the files at a path, not a table
FILE_SOURCES = {"text", "csv", "json", "parquet", "orc", "avro", "binaryfile", "delta",
                "xml", "libsvm", "image", "jdbc", "hive", "file", "noop", "console"}
# what the common statements are called (the parsed plan's class -> the SQL words)
KINDS = {
    "InsertIntoStatement": "INSERT", "InsertIntoDir": "INSERT OVERWRITE DIRECTORY",
    "CreateTableAsSelect": "CREATE TABLE", "CreateTable": "CREATE TABLE",
    "ReplaceTableAsSelect": "REPLACE TABLE", "CreateViewCommand": "CREATE VIEW",
    "CreateView": "CREATE VIEW", "DropTable": "DROP TABLE", "DropView": "DROP VIEW",
    "DropNamespace": "DROP DATABASE", "CreateNamespace": "CREATE DATABASE",
    "SetCommand": "SET", "ResetCommand": "RESET", "CacheTable": "CACHE TABLE",
    "CacheTableAsSelect": "CACHE TABLE", "UncacheTable": "UNCACHE TABLE",
    "ClearCacheCommand$": "CLEAR CACHE", "AddJarsCommand": "ADD JAR",
    "AddFilesCommand": "ADD FILE", "AddArchivesCommand": "ADD ARCHIVE",
    "MergeIntoTable": "MERGE", "DeleteFromTable": "DELETE", "UpdateTable": "UPDATE",
    "TruncateTable": "TRUNCATE", "AddColumns": "ALTER TABLE", "RenameTable": "ALTER TABLE",
    "SetTableProperties": "ALTER TABLE", "DropColumns": "ALTER TABLE",
    "RefreshTable": "REFRESH", "RefreshResource": "REFRESH", "RepairTable": "MSCK REPAIR",
    "Call": "CALL", "UnresolvedExecuteImmediate": "EXECUTE IMMEDIATE",
    "CompoundBody": "a SQL script", "LoadData": "LOAD DATA",
    "SetCatalogAndNamespace": "USE", "AnalyzeTable": "ANALYZE TABLE",
    "CreateVariable": "DECLARE", "SetVariable": "SET VAR", "CreateFunction": "CREATE FUNCTION",
    "CreateFunctionCommand": "CREATE FUNCTION",
}


def check_read_only(spark, sql: str, catalogue: bool, what: str) -> None:
    """Raise ``NotAQuery`` unless ``sql`` is one query (or, with ``catalogue``, a SHOW,
    DESCRIBE or EXPLAIN). ``what`` starts the message (``query only reads``, ``models/x.sql:
    a model is one query``). Parsing runs nothing; a syntax error is Spark's own message."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import ParseException

    unparsable = (Py4JJavaError, ParseException)
    parser = spark._jsparkSession.sessionState().sqlParser()
    try:
        plan = parser.parsePlan(sql)
    except unparsable as exc:
        raise UserError(_parse_error(exc)) from None
    name = plan.getClass().getSimpleName()
    if catalogue and name in CATALOGUE:
        return
    try:
        parser.parseQuery(sql)
    except unparsable:
        kind = KINDS.get(name) or _kind(plan) or name
        raise NotAQuery(f"{what}: this is {_article(kind)} statement, and it was not run "
                        f"({_allowed(catalogue)})", kind) from None
    functions, relations = _names(spark, plan)
    for parts in relations:
        if by_path(parts):
            raise NotAQuery(f"{what}: {parts[0]}.`{parts[-1][:80]}` reads files by their path, "
                            "and it was not run (a query reads the lake's tables and views by "
                            "name, through Delta)", "a path")
    called = functions & JVM_FUNCTIONS
    if called:
        fn = sorted(called)[0]
        raise NotAQuery(f"{what}: {fn}() calls into the JVM and is not allowed; nothing was "
                        "run", f"{fn}()")


def _allowed(catalogue: bool) -> str:
    return ("it runs SELECT or WITH queries, SHOW, DESCRIBE and EXPLAIN" if catalogue
            else "one SELECT or WITH query")


def _article(kind: str) -> str:
    return kind if kind.startswith("a ") else ("an " if kind[0] in "AEIOU" else "a ") + kind


def _kind(plan) -> str | None:
    """The first node of the plan that has a name here (``WITH … INSERT``: INSERT)."""
    stack = [plan]
    while stack:
        node = stack.pop()
        name = node.getClass().getSimpleName()
        if name in KINDS:
            return KINDS[name]
        it = node.children().iterator()
        while it.hasNext():
            stack.append(it.next())
    return None


def by_path(parts: list[str]) -> bool:
    """Whether a table reference (its name's parts) reads files by path: a file source's
    name before it (``text.`/etc/passwd```), or a path for a name."""
    last = parts[-1]
    return len(parts) > 1 and (parts[0].lower() in FILE_SOURCES or "/" in last
                               or "\\" in last or ":" in last)


def _names(spark, plan) -> tuple[set[str], list[list[str]]]:
    """The lower-case names of every function the parsed plan calls, and the name parts of
    every table it reads, in every part of it (CTEs, subqueries, expressions): a walk over
    Scala's products and collections."""
    from py4j.java_gateway import JavaObject

    jvm = spark._jvm
    product = jvm.java.lang.Class.forName("scala.Product")
    iterable = jvm.java.lang.Class.forName("scala.collection.Iterable")
    identity = jvm.java.lang.System.identityHashCode
    unresolved = "org.apache.spark.sql.catalyst.analysis.UnresolvedFunction"
    relation = "org.apache.spark.sql.catalyst.analysis.UnresolvedRelation"
    seen, names, relations, stack = set(), set(), [], [plan]
    while stack and len(seen) < 100_000:
        obj = stack.pop()
        if not isinstance(obj, JavaObject):
            continue  # text, numbers: py4j hands them over as Python values
        key = identity(obj)
        if key in seen:
            continue
        seen.add(key)
        kind = obj.getClass().getName()
        if kind == unresolved:
            names.add(obj.nameParts().last().lower())
        elif kind == relation:
            parts, it = [], obj.multipartIdentifier().iterator()
            while it.hasNext():
                parts.append(str(it.next()))
            relations.append(parts)
        if product.isInstance(obj):
            it = obj.productIterator()
        elif iterable.isInstance(obj):
            it = obj.iterator()
        else:
            continue
        while it.hasNext():
            stack.append(it.next())
    return names, relations


def _parse_error(exc) -> str:
    """Spark's syntax error in one line (its error class and position)."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0][:300] if lines else "Spark cannot parse this statement"
