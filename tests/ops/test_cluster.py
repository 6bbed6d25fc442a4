"""The standalone cluster (``make cluster-up``): a master and two worker JVMs on this
machine; ``run --profile standalone`` on it publishes exactly the tables ``local`` does:
every pattern's matches, every source's events, every model."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from deltalake import DeltaTable

from jobs.ops import cluster

from ..conftest import LOGICAL_DATE, ROOT


@pytest.fixture(scope="module")
def running():
    """The cluster, up for this module (left as found: stopped only if started here)."""
    was_up = cluster.status() is not None
    state = cluster.up(echo=lambda *_: None)
    yield state
    if not was_up:
        cluster.down(echo=lambda *_: None)


def _run(profile: str, conf, tmp_path) -> subprocess.CompletedProcess:
    """``make run`` with ``profile``: every pattern, then the models."""
    env = dict(os.environ, SES_PIPELINE_CONF=str(conf), PYTHONPATH=str(ROOT))
    args = [sys.executable, "-m", "jobs", "run", "--profile", profile,
            "--logical-date", LOGICAL_DATE]
    return subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=1800)


def _rows(lake, table: str) -> list[dict]:
    rows = DeltaTable(str(lake / table)).to_pyarrow_table().to_pylist()
    drop = {"run_id", "ingest_run", "ingested_at"}
    return sorted(({k: v for k, v in r.items() if k not in drop} for r in rows),
                  key=lambda r: repr(sorted(r.items())))


def test_cluster_has_two_workers(running):
    assert running["aliveworkers"] == 2
    assert {w["host"] for w in running["workers"] if w["state"] == "ALIVE"} == {"127.0.0.1"}


def test_standalone_run_equals_local(running, nightly, tmp_path):
    """``ses run --profile standalone`` on the cluster against the session's local run of
    the same data and logical date (``nightly``: every pattern and model on local[2])."""
    doc = yaml.safe_load((ROOT / "conf" / "pipeline.yaml").read_text())
    doc["profiles"]["standalone"]["lake"] = str(tmp_path / "lake-standalone")
    doc["profiles"]["standalone"].pop("site", None)
    conf = tmp_path / "pipeline.yaml"
    conf.write_text(yaml.safe_dump(doc))
    before = {a["id"] for a in (cluster.status() or {}).get("completedapps", [])}
    out = _run("standalone", conf, tmp_path)  # the project's cwd is not the executors'
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    standalone, local = tmp_path / "lake-standalone", Path(nightly[0].lake)
    apps = [a for a in cluster.status()["completedapps"] if a["id"] not in before]
    assert [a["name"] for a in apps] == ["ses-lakehouse"]  # it ran on the cluster
    # the tables of the run under test (the session's local lake may hold more: tests
    # that share it add models of their own)
    tables = [f"{kind}/{t.name}" for kind in ("matches", "events", "models")
              for t in sorted((standalone / kind).iterdir())]
    patterns = {p.stem for p in (ROOT / "patterns").glob("*.y*ml")}
    models = {p.stem for p in (ROOT / "models").glob("*.sql")}
    assert {t.split("/")[1] for t in tables if t.startswith("matches/")} == patterns
    assert {t.split("/")[1] for t in tables if t.startswith("models/")} == models
    assert {t.split("/")[1] for t in tables if t.startswith("events/")} == \
        {t.name for t in (local / "events").iterdir()}  # every source, as before
    for table in tables:
        a, b = _rows(standalone, table), _rows(local, table)
        assert a == b, table


def test_the_dag_submits_to_the_profile_master():
    """A step the DAG runs with its own spark-submit goes to the profile's master, with
    the profile's settings and, off a local master, the jobs package."""
    from jobs.config import load_profile
    from jobs.spark.session import submit_command

    standalone = load_profile("standalone")
    cmd = submit_command(standalone, "spark-submit", "spark_entry.py", ["run"])
    assert cmd[:3] == ["spark-submit", "--master", standalone.spark_master]
    assert cmd[cmd.index("--py-files") + 1].endswith(".zip")
    assert f"spark.executor.memory={standalone.spark_conf['spark.executor.memory']}" in cmd
    assert cmd[-2:] == ["spark_entry.py", "run"]
    local = submit_command(load_profile("local"), "spark-submit", "e.py", [])
    assert local[2] == load_profile("local").spark_master and "--py-files" not in local
