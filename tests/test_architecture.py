"""The map of docs/architecture.md, enforced: every import between the project's packages
points down the layers, no module takes part in an import circle, and no module imports
one of the project's modules inside a function to dodge one (only heavy third-party
libraries are imported on first use). Pure: reads the source, imports nothing."""

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "jobs"

# Lowest first. A module may import its own package and the packages of lower layers.
LAYERS = [
    {"environment"},  # the environment variables, read in one place
    {"core"},  # core's own modules: errors, inputs
    {"core.language"},
    {"core.plans", "core.reference", "core.rowpattern"},
    {"core.engine"},
    {"core.local"},
    {"config", "status", "failpoints", "progress", "runrecord"},
    {"notify"},  # alerts to people: webhooks and email
    {"landing"},  # the landing files' format: reading and typing, no lake, no Spark
    {"lake"},
    {"spark", "project"},
    {"site"},
    {"pipeline"},
    {"tools", "prcheck", "ops"},
    {"cli"},
    {"__main__"},
]
RANK = {name: i for i, layer in enumerate(LAYERS) for name in layer}

# In-function imports of the project's own modules that are allowed, with the reason.
LAZY = {
    ("jobs.core.engine.aot", "jobs.core.engine.kernels"): "the Numba kernels: only when the kernels "
                                            "compiled ahead of time cannot be used, so "
                                            "neither `validate` nor `match` loads Numba",
}


def modules() -> dict[str, Path]:
    out = {}
    for p in PACKAGE.rglob("*.py"):
        parts = p.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def imports(name: str, path: Path, known: set[str]):
    """(target module, line, inside a function) for each import of a project module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    top = {id(n) for n in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: a relative import; write jobs.…"
            base = node.module or ""
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for t in targets:
            if t.split(".")[0] != "jobs":
                continue
            while t not in known and "." in t:
                t = t.rsplit(".", 1)[0]
            if t != name:
                yield t, node.lineno, id(node) not in top


def package_of(module: str) -> str:
    """The layer's name of a module: its package under ``jobs``, or for ``core`` its part
    (``core.language``, ``core.engine``, …; ``core`` for core's own modules)."""
    parts = module.split(".")
    if len(parts) > 3 and parts[1] == "core":
        return f"core.{parts[2]}"
    return parts[1] if len(parts) > 1 else "jobs"


@pytest.fixture(scope="module")
def graph():
    mods = modules()
    known = set(mods)
    edges = defaultdict(dict)
    for name, path in mods.items():
        for target, line, lazy in imports(name, path, known):
            edges[name].setdefault(target, (line, lazy))
    return mods, edges


def test_every_package_has_a_layer(graph):
    mods, _ = graph
    missing = {package_of(m) for m in mods} - set(RANK) - {"jobs"}
    assert not missing, f"packages without a layer in LAYERS (and docs/architecture.md): {missing}"


def upward(graph, part_of, rank: dict[str, int]) -> list[str]:
    """The imports from one part to another part of the same or a higher rank: ``part_of``
    names a module's part (None: not ranked here)."""
    mods, edges = graph
    wrong = []
    for src, targets in edges.items():
        a = part_of(src)
        for dst, (line, _) in targets.items():
            b = part_of(dst)
            if a in rank and b in rank and a != b and rank[b] >= rank[a]:
                wrong.append(f"{mods[src].relative_to(ROOT)}:{line}: {src} imports {dst} "
                             f"({a} is {rank[a]}, {b} {rank[b]})")
    return wrong


def test_imports_point_down_the_layers(graph):
    wrong = upward(graph, package_of, RANK)
    assert not wrong, "imports that do not point down the layers:\n" + "\n".join(wrong)


def test_no_project_import_inside_a_function(graph):
    mods, edges = graph
    lazy = [f"{mods[src].relative_to(ROOT)}:{line}: {src} imports {dst} inside a function"
            for src, targets in edges.items() for dst, (line, inside) in targets.items()
            if inside and (src, dst) not in LAZY]
    assert not lazy, "\n".join(lazy)


def test_no_import_circles(graph):
    _, edges = graph
    index, low, stack, on, circles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in list(edges):
        if v not in index:
            visit(v)
    assert not circles, f"import circles: {circles}"


def test_the_checks_catch_a_circle_and_an_upward_import(tmp_path):
    """The test above could pass by reading nothing: it must see a planted circle."""
    known = {"jobs.core.a", "jobs.core.b", "jobs.pipeline.c"}
    a = tmp_path / "a.py"
    a.write_text("from jobs.core.b import x\n\ndef f():\n    from jobs.pipeline.c import y\n")
    found = list(imports("jobs.core.a", a, known))
    assert ("jobs.core.b", 1, False) in found and ("jobs.pipeline.c", 4, True) in found
    assert RANK[package_of("jobs.pipeline.c")] > RANK[package_of("jobs.core.a")]


def test_the_parts_of_core(graph):
    """The language is the bottom of core; the reference (the oracle) imports neither the
    engine nor its kernels, so the two can check each other; plans know no engine."""
    _, edges = graph
    for src, targets in edges.items():
        part = package_of(src)
        for dst in targets:
            if part in ("core.reference", "core.language", "core.plans"):
                assert package_of(dst) != "core.engine", f"{src} imports {dst}"
            if part == "core.language":
                assert package_of(dst) in ("core", "core.language"), f"{src} imports {dst}"


def test_environment_variables_are_read_in_one_module():
    """``jobs.environment`` reads every variable (and lists it for docs/operations.md):
    no other module reads one itself."""
    reads = re.compile(r"os\.environ\.get\(|os\.getenv\(|os\.environ\[")
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted(PACKAGE.rglob("*.py"))
             if p.name != "environment.py"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if reads.search(line)]
    assert not found, f"environment variables read outside jobs/environment.py: {found}"
    tree = ast.parse((PACKAGE / "environment.py").read_text(encoding="utf-8"))
    variables = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                     and n.targets[0].id == "VARIABLES")
    documented = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    missing = [name for name in variables if f"`{name}`" not in documented]
    assert not missing, f"variables not listed in docs/operations.md: {missing}"


def test_the_code_points_to_the_docs_not_to_a_tracker():
    """The issue tracker is not in the repository: code, tests and benchmarks cite
    docs/, never "issue N"."""
    cited = re.compile(r"\bissue #?\d+", re.IGNORECASE)
    found = [f"{p.relative_to(ROOT)}:{n}" for folder in ("jobs", "tests", "bench", "dags")
             for p in sorted((ROOT / folder).rglob("*.py"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if cited.search(line) and p.name != "test_architecture.py"]
    assert not found, f"references to an issue tracker: {found}"


# jobs/pipeline: the night's phases (packages) around its few root modules, lowest first.
# The events suite (validate) gates ingest, so it lies below it; a phase imports only the
# phases below it.
PIPELINE_ORDER = [{"context", "outcome"}, {"validate"}, {"ingest"}, {"match"}, {"publish"},
                  {"upkeep"}, {"report"}, {"run"}]
PIPELINE_RANK = {name: i for i, layer in enumerate(PIPELINE_ORDER) for name in layer}


def _phase(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "pipeline" else None


def test_the_pipeline_is_in_phase_packages():
    """At most 8 modules directly in jobs/pipeline/; every phase package says what it is
    in a docstring, and the order above knows every part of the pipeline."""
    folder = PACKAGE / "pipeline"
    direct = sorted(p.name for p in folder.glob("*.py"))
    assert len(direct) <= 8, direct
    packages = sorted(p.name for p in folder.iterdir() if (p / "__init__.py").exists())
    for name in packages:
        doc = ast.get_docstring(ast.parse((folder / name / "__init__.py").read_text()))
        assert doc and len(doc) > 80, f"jobs/pipeline/{name}/__init__.py: no docstring"
    parts = {p.removesuffix(".py") for p in direct} - {"__init__"} | set(packages)
    assert parts == set(PIPELINE_RANK), parts ^ set(PIPELINE_RANK)


def test_the_pipeline_phases_import_down(graph):
    wrong = upward(graph, _phase, PIPELINE_RANK)
    assert not wrong, "pipeline phases importing upwards:\n" + "\n".join(wrong)


def test_the_lake_knows_no_spark():
    """``jobs.lake`` reads and writes the lake with delta-rs and pyarrow alone: a table as
    a Spark frame, the Spark side of the statistics and the views on a Spark session live
    in ``jobs.spark``; and what the lake keeps between reads is one bounded cache class."""
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted((PACKAGE / "lake").rglob("*.py"))
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\b(import|from)\s+pyspark", line)]
    assert not found, f"pyspark in jobs/lake: {found}"
    caches = [f"{p.relative_to(ROOT)}:{n}" for folder in ("lake", "spark")
              for p in sorted((PACKAGE / folder).rglob("*.py"))
              for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
              if "OrderedDict" in line and p.name != "cache.py"]
    assert not caches, f"a cache of its own (use jobs.lake.cache.Bounded): {caches}"


def test_the_runs_table_has_one_home():
    """The runs table is read and written in ``jobs/lake/runs.py`` only: every other
    module asks it (``read_runs``, ``log_run``, ``planning_runs``, ...)."""
    found = [f"{p.relative_to(ROOT)}:{n}" for p in sorted(PACKAGE.rglob("*.py"))
             if p.relative_to(PACKAGE).as_posix() != "lake/runs.py"
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"(read_arrow|read_table|append|write_deltalake|table)\([^)]*\.runs\(\)",
                          line)]
    assert not found, f"the runs table read or written outside jobs/lake/runs.py: {found}"


def test_no_module_is_longer_than_600_lines_but_the_kernels():
    long = {str(p.relative_to(ROOT)): n for p in sorted(PACKAGE.rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600
            and p.name != "kernels.py"}
    assert not long, long
    assert len((PACKAGE / "pipeline" / "run.py").read_text().splitlines()) <= 400
    assert len((PACKAGE / "lake" / "store.py").read_text().splitlines()) <= 500
