import fcntl
import json
import logging
import os
import pickle
import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"

# A pytest-xdist worker's __main__ has neither a spec nor a file, which pyspark.sql.connect
# (imported by Great Expectations) takes for a doctest run and answers with sys.exit(0).
_main = sys.modules["__main__"]
if getattr(_main, "__spec__", None) is None and not hasattr(_main, "__file__"):
    _main.__file__ = "<pytest-xdist worker>"

# Every Spark driver JVM the tests start (this process's session, and the `python -m jobs`
# subprocesses and Airflow tasks, which inherit the variable) compiles with C1 only and
# collects with the parallel collector: the tests' JVMs live for seconds to minutes on a
# few megabytes, where C2's compiler threads compete with the work for two cores. A night
# took 81-85 s against 100-101 s (docs/testing.md). The product's own JVMs keep the
# defaults, which pay off on a night of real size. C1 alone reserves 48 MB for compiled
# code, and one session serves hundreds of tests' query shapes: a session filled it
# (JIT off, then "out of space in CodeCache for adapters" ended the JVM and every later
# Spark test of its worker), so the tests' JVMs reserve what a tiered JVM does.
TEST_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC -XX:ReservedCodeCacheSize=240m"
os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTS)

# CI runs a fixed, reproducible set of examples; locally each run explores new ones.
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=150,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=150,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


# Markers set on every test here, so that `pytest -m "not spark"` runs the pure tests
# alone (docs/testing.md). A test uses Spark when it asks for the `spark` fixture (directly
# or through another fixture) or lives in a module that starts Spark in a subprocess.
SPARK_MODULES = {"test_cluster.py", "test_kills.py", "test_airflow.py", "test_project.py"}
AIRFLOW_MODULES = {"test_airflow.py"}
# `slow`: a test that starts a Spark application, a cluster or Airflow in a subprocess,
# or reads the real-data slices (each of these takes tens of seconds)
SLOW_MODULES = SPARK_MODULES | {"test_real_slices.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if "spark" in names or item.path.name in SPARK_MODULES:
            item.add_marker(pytest.mark.spark)
        if "airflow_env" in names or item.path.name in AIRFLOW_MODULES:
            item.add_marker(pytest.mark.airflow)
        if item.path.name in SLOW_MODULES:
            item.add_marker(pytest.mark.slow)
    items[:] = longest_first(items)


# Each module's seconds in a whole run (tests/module_seconds.json, written by
# tests/module_seconds.py from `pytest --durations=0`): the modules go to the two xdist
# workers longest first (the Makefile turns off xdist's own order, most tests first), so
# that no long module is left to run alone at the end
MODULE_SECONDS = Path(__file__).with_name("module_seconds.json")


def longest_first(items: list) -> list:
    """``items`` with their modules in decreasing order of their recorded seconds (a
    module not recorded: a tenth of a second a test), a module's own tests in their order. The
    second module is the longest that does not use the ``nightly`` fixture: the first
    builds it, and the other worker would wait for it."""
    seconds = json.loads(MODULE_SECONDS.read_text()) if MODULE_SECONDS.exists() else {}
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::")[0], []).append(item)
    order = sorted(modules, key=lambda m: -seconds.get(m, 0.1 * len(modules[m])))
    nightly = {m for m, its in modules.items()
               if any("nightly" in getattr(i, "fixturenames", ()) for i in its)}
    if len(order) > 2 and order[0] in nightly and order[1] in nightly:
        free = next((m for m in order if m not in nightly), None)
        if free is not None:
            order.remove(free)
            order.insert(1, free)
    return [item for m in order for item in modules[m]]


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


SPARK_CONF = {
    # one JVM serves the whole run (~390 tests): 1g (the default) left the sorts of a late
    # test spilling page by page for half an hour
    "spark.driver.memory": "3g",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.files.openCostInBytes": "65536",
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}


def make_profile(tmp: Path, landing: Path | None = None, **kw):
    """A pipeline profile on a private lake (and landing copy) under ``tmp``."""
    from jobs.config import Profile

    if landing is None:
        landing = tmp / "landing"
        if not landing.exists():
            shutil.copytree(ROOT / "data" / "landing", landing)
    opts = dict(allowed_lateness=0, slice_length=7 * 86400 * 10**9, max_partition_events=1_000_000,
                max_matches_per_window=100_000)
    opts.update(kw)
    return Profile(name="test", landing=str(landing), lake=str(tmp / "lake"),
                   spark_master="local[2]", spark_conf=SPARK_CONF, **opts)


LOGICAL_DATE = "2026-11-20"


def _night(spark, folder: Path):
    from jobs.pipeline.run import run_all

    profile = make_profile(folder)
    log = []
    rows = run_all(spark, profile, LOGICAL_DATE, echo=log.append)
    return profile, rows, log


@pytest.fixture(scope="session")
def nightly(spark, tmp_path_factory):
    """One night of every committed pattern and model on the committed data, run once per
    test run for the tests that read a whole lake: the profile, the run's rows and its log
    lines. Under pytest-xdist the first worker to ask runs it and leaves a copy (landing,
    lake, rows and log) beside the workers' folders; the others wait for it and copy it
    into their own folder, so each worker's tests may add to their lake."""
    own = tmp_path_factory.mktemp("nightly")
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return _night(spark, own)
    shared = tmp_path_factory.getbasetemp().parent / "nightly-shared"
    shared.mkdir(exist_ok=True)
    done = shared / "night.pickle"
    with open(shared / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not done.exists():
            profile, rows, log = _night(spark, own)
            for folder in ("landing", "lake"):
                shutil.copytree(own / folder, shared / folder, symlinks=True)
            done.write_bytes(pickle.dumps((rows, log, str(own))))
            return profile, rows, log
    rows, log, built_in = pickle.loads(done.read_bytes())
    for folder in ("landing", "lake"):
        shutil.copytree(shared / folder, own / folder, symlinks=True)
    return make_profile(own), rows, [line.replace(built_in, str(own)) for line in log]


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The one SparkSession of the test run."""
    from jobs.spark.session import build_session

    session = build_session(make_profile(tmp_path_factory.mktemp("spark")), "ses-tests")
    yield session
    session.stop()
    # py4j logs each connection it closes at INFO, and the last ones close when the
    # interpreter collects them, after pytest has closed the streams a handler writes to
    logging.getLogger("py4j").setLevel(logging.WARNING)
