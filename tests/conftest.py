import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"

# CI runs a fixed, reproducible set of examples; locally each run explores new ones.
settings.register_profile("ci", derandomize=True, deadline=None, max_examples=150,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=150,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else os.environ.get("HYPOTHESIS_PROFILE", "dev"))


# Markers set on every test here, so that `pytest -m "not spark"` runs the pure tests
# alone (docs/testing.md). A test uses Spark when it asks for the `spark` fixture (directly
# or through another fixture) or lives in a module that starts Spark in a subprocess.
SPARK_MODULES = {"test_cluster.py", "test_kills.py", "test_airflow.py"}
AIRFLOW_MODULES = {"test_airflow.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if "spark" in names or item.path.name in SPARK_MODULES:
            item.add_marker(pytest.mark.spark)
        if "airflow_env" in names or item.path.name in AIRFLOW_MODULES:
            item.add_marker(pytest.mark.airflow)


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
    import shutil

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


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The one SparkSession of the test run."""
    from jobs.spark.session import build_session

    session = build_session(make_profile(tmp_path_factory.mktemp("spark")), "ses-tests")
    yield session
    session.stop()
