"""The standalone cluster (``make cluster-up``): a master and two worker JVMs on this
machine; ``run --profile standalone`` on it publishes exactly the tables ``local`` does:
every pattern's matches, every source's events, every model."""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml
from deltalake import DeltaTable

from jobs.ops import cluster

from ..conftest import LOGICAL_DATE, ROOT, TEST_JVM_OPTS


@pytest.fixture(scope="module")
def running():
    """The cluster, up for this module (left as found: stopped only if started here)."""
    was_up = cluster.status() is not None
    state = cluster.up(echo=lambda *_: None)
    yield state
    if not was_up:
        cluster.down(echo=lambda *_: None)


def _rows(lake, table: str) -> list[dict]:
    rows = DeltaTable(str(lake / table)).to_pyarrow_table().to_pylist()
    drop = {"run_id", "ingest_run", "ingested_at"}
    return sorted(({k: v for k, v in r.items() if k not in drop} for r in rows),
                  key=lambda r: repr(sorted(r.items())))


def test_cluster_has_two_workers(running):
    assert running["aliveworkers"] == 2
    assert {w["host"] for w in running["workers"] if w["state"] == "ALIVE"} == {"127.0.0.1"}


# one pattern of each kind the cluster runs differently: every source, both matchers, a
# source pass (with a ZStream pattern in it), time slices (no X), a disjunction, partition
# contiguity, a window pattern, episodes, first_ever's state, history conditions, and the
# models' inputs (the hospital's own pass repeated sepsis's at 9 s more)
ON_CLUSTER = ("hospital_ca125_with_history_no_prior_chemo", "mw_chemo_p1", "ses_chemo_q1",
              "paper_ex4_next_room", "paper_ex6_lab_to_home_passes", "sepsis_er_episode",
              "sepsis_rising_crp_then_icu", "sepsis_antibiotics_without_prior_lactate",
              "sepsis_escalation_either_way", "sepsis_first_antibiotics_then_icu",
              "sepsis_high_marker_then_admission", "sepsis_triage_next_is_treatment")


def _project(tmp_path) -> Path:
    """A copy of the project with the ``ON_CLUSTER`` patterns, on a lake of its own."""
    home = tmp_path / "project"
    for folder in ("conf", "models", "expectations", "data"):
        shutil.copytree(ROOT / folder, home / folder)
    (home / "patterns").mkdir()
    for name in ON_CLUSTER:
        shutil.copy(ROOT / "patterns" / f"{name}.yaml", home / "patterns")
    doc = yaml.safe_load((home / "conf" / "pipeline.yaml").read_text())
    doc["profiles"]["standalone"]["lake"] = str(tmp_path / "lake-standalone")
    doc["profiles"]["standalone"].pop("site", None)
    # the executors' JVMs, as the tests' drivers (conftest): 77 s against 95 s alone
    doc["profiles"]["standalone"]["spark"]["conf"]["spark.executor.extraJavaOptions"] = \
        TEST_JVM_OPTS
    (home / "conf" / "pipeline.yaml").write_text(yaml.safe_dump(doc))
    return home


def test_standalone_run_equals_local(running, nightly, tmp_path):
    """``ses run --profile standalone`` on the cluster against the session's local run of
    the same data and logical date (``nightly``: every pattern and model on local[2]):
    the cluster runs one pattern of each kind (``ON_CLUSTER``), every source and model."""
    home = _project(tmp_path)
    before = {a["id"] for a in (cluster.status() or {}).get("completedapps", [])}
    env = dict(os.environ, SES_PROJECT_DIR=str(home), PYTHONPATH=str(ROOT))
    for other in ("SES_PIPELINE_CONF", "SES_MODELS"):  # the copy's own
        env.pop(other, None)
    out = subprocess.run([sys.executable, "-m", "jobs", "run", "--profile", "standalone",
                          "--logical-date", LOGICAL_DATE], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    standalone, local = tmp_path / "lake-standalone", Path(nightly[0].lake)
    apps = [a for a in cluster.status()["completedapps"] if a["id"] not in before]
    assert [a["name"] for a in apps] == ["ses-lakehouse"]  # it ran on the cluster
    # the tables of the run under test (the session's local lake may hold more: tests
    # that share it add models of their own)
    tables = [f"{kind}/{t.name}" for kind in ("matches", "events", "models")
              for t in sorted((standalone / kind).iterdir())]
    models = {p.stem for p in (ROOT / "models").glob("*.sql")}
    assert {t.split("/")[1] for t in tables if t.startswith("matches/")} == set(ON_CLUSTER)
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


def test_drivers_of_one_version_share_one_jobs_zip_for_their_executors():
    """The zip of the jobs package a driver hands its executors is named by its content:
    drivers of one version of the code share one file (nightly runs leave no file per
    process behind), and it holds the package's sources."""
    code = ("from jobs.spark.session import project_zip\n"
            "print(project_zip())\n")
    paths = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              cwd=ROOT, timeout=60)
        assert done.returncode == 0, done.stderr
        paths.append(Path(done.stdout.strip()))
    assert paths[0] == paths[1] and paths[0].name.startswith("ses-jobs-")
    names = zipfile.ZipFile(paths[0]).namelist()
    assert "jobs/spark/session.py" in names and not any("__pycache__" in n for n in names)
    assert not list(paths[0].parent.glob(f"{paths[0].stem}.*.part"))
