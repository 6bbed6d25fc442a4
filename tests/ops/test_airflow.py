"""The Airflow DAG with the real Airflow (SQLite, in a private AIRFLOW_HOME): it imports
cleanly with the expected tasks, and ``dag.test()`` runs it end to end on a small real
data set, publishing the right matches and run log; a failing quality gate stops
publishing. Airflow runs in a subprocess so its settings do not leak into other tests."""

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from deltalake import DeltaTable

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def airflow_env(tmp_path_factory):
    home = tmp_path_factory.mktemp("airflow")
    env = dict(os.environ, AIRFLOW_HOME=str(home), AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
               AIRFLOW__CORE__LOAD_EXAMPLES="False", AIRFLOW__CORE__UNIT_TEST_MODE="False")
    proc = subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env,
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return env


def python(env, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env,
                          capture_output=True, text=True, cwd=ROOT, timeout=1200)


def test_dag_imports_with_expected_tasks(airflow_env):
    proc = python(airflow_env, """
        import json
        from airflow.dag_processing.dagbag import DagBag
        bag = DagBag(%r)
        dag = bag.get_dag("ses_nightly")
        print(json.dumps({"errors": {k: str(v) for k, v in bag.import_errors.items()},
                          "tasks": sorted(t.task_id for t in dag.tasks),
                          "map_index": dag.get_task("run_source").map_index_template,
                          "catchup": dag.catchup, "max_active_runs": dag.max_active_runs,
                          "retries": dag.default_args["retries"],
                          "notifiers": [type(c).__name__ for c in
                                        dag.get_task("run_source").on_failure_callback],
                          "schedule": repr(dag.timetable)}))
    """ % str(ROOT / "dags"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    info = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info["errors"] == {}
    assert info["tasks"] == ["catalogue", "ingest", "list_groups", "maintain",
                             "model_lab_to_home_passes",
                             "model_paper_ex4_room_state", "model_sepsis_episodes",
                             "run_source", "spark_session", "stop_session", "summary"]
    assert info["map_index"] == "{{ group_name }}"  # mapped tasks show the source's name
    assert info["catchup"] is False and info["max_active_runs"] == 1 and info["retries"] == 2
    assert info["notifiers"] == ["SesNotifier"]  # a task that fails for good alerts
    assert "expression='0 2 * * *'" in info["schedule"]


def _profile(tmp_path: Path, extra_rows: str = "") -> dict:
    landing = tmp_path / "landing"
    shutil.copytree(ROOT / "data" / "landing" / "chemo_mw", landing / "chemo_mw")
    if extra_rows:
        (landing / "chemo_mw" / "extra.csv").write_text(
            "event_id,patient,type,value,unit,ts\n" + extra_rows)
    conf = tmp_path / "pipeline.yaml"
    conf.write_text(textwrap.dedent(f"""\
        airflow: {{schedule: "0 2 * * *", start_date: "2010-07-01", retries: 0}}
        profiles:
          test:
            landing: {landing}
            lake: {tmp_path / 'lake'}
            spark:
              master: local[2]
              conf: {{spark.sql.shuffle.partitions: "4", spark.ui.enabled: "false",
                      spark.ui.showConsoleProgress: "false", spark.sql.session.timeZone: UTC}}
            match: {{allowed_lateness: 0s, slice_length: 7d}}
        """))
    models = tmp_path / "models"
    models.mkdir()
    (models / "chemo_counts.sql").write_text(
        "SELECT patient, count(*) AS matches FROM matches_mw_chemo_p1 GROUP BY patient")
    (models / "chemo_counts.yaml").write_text("tests:\n  - unique: [patient]\n")
    (models / "chemo_busy.sql").write_text("SELECT * FROM models_chemo_counts WHERE matches > 1")
    return {"SES_PIPELINE_CONF": str(conf), "SES_PROFILE": "test",
            "SES_PATTERNS": "patterns/mw_chemo_p1.yaml", "SES_MODELS": str(models)}


DAG_TEST = """
    from datetime import datetime, timezone
    from airflow.dag_processing.dagbag import DagBag
    dag = DagBag(%r).get_dag("ses_nightly")
    when = datetime(2010, 8, 30, tzinfo=timezone.utc)
    run = dag.test(**({"logical_date": None, "run_after": when} if %s else {"logical_date": when}))
    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    names = sorted(ti.rendered_map_index for ti in run.get_task_instances()
                   if ti.task_id == "run_source")
    print("RESULT", run.state, states)
    print("MAPPED", names)
"""

RUN_ID = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{6}$")  # the one shape, sorted by time


def dag_test(no_date: bool = False) -> str:
    return DAG_TEST % (str(ROOT / "dags"), no_date)


def test_dag_test_runs_the_whole_pipeline(airflow_env, tmp_path):
    env = dict(airflow_env, **_profile(tmp_path))
    proc = python(env, dag_test())
    result = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    assert result and result[0].startswith("RESULT success"), proc.stdout[-3000:] + proc.stderr[-3000:]
    t = DeltaTable(str(tmp_path / "lake" / "matches" / "mw_chemo_p1")).to_pyarrow_table()
    assert sorted(dict(b)["c"][0] for b in t.column("bindings").to_pylist()) == ["e1", "e7", "e7"]
    runs = DeltaTable(str(tmp_path / "lake" / "runs")).to_pyarrow_table().to_pylist()
    assert [(r["logical_date"], r["status"], r["matches"]) for r in runs] == \
        [("2010-08-30", "success", 3)]
    assert RUN_ID.match(runs[0]["run_id"]), runs[0]["run_id"]
    assert runs[0]["match_seconds"] > 0 and runs[0]["publish_seconds"] > 0
    assert "MAPPED ['chemo_mw']" in proc.stdout  # the mapped task is named by its source
    assert " INFO " not in proc.stdout + proc.stderr  # Spark logs at WARN
    # the model tasks ran after the pattern group, the dependent one after its parent
    assert "'model_chemo_counts': 'success'" in result[0]
    assert "'model_chemo_busy': 'success'" in result[0]
    counts = DeltaTable(str(tmp_path / "lake" / "models" / "chemo_counts")).to_pyarrow_table()
    assert sum(counts.column("matches").to_pylist()) == 3


ANY_P = """\
name: mw_chemo_any_p
source: chemo_mw
within: 15d
sets: [[c, p+], [b]]
conditions: [c.type = 'C', p.type = 'P', b.type = 'B', c.patient = p.patient,
             p.patient = b.patient]
"""


def test_dag_without_a_logical_date_one_task_per_source_a_bad_file_fails_alone(
        airflow_env, tmp_path):
    """An API trigger gives no logical date: the run's own time names the day. The two
    patterns of chemo_mw run in one task (one pass); a file that does not load fails its
    own task, named after it, and the summary; the others are published."""
    folder = tmp_path / "patterns"
    folder.mkdir()
    shutil.copy(ROOT / "patterns" / "mw_chemo_p1.yaml", folder)
    (folder / "any_p.yaml").write_text(ANY_P)
    (folder / "broken.yaml").write_text("name: broken\nsource: chemo_mw\nwithin: 2d\nsets: [[\n")
    env = dict(airflow_env, **dict(_profile(tmp_path), SES_PATTERNS=str(folder / "*.yaml")))
    proc = python(env, dag_test(no_date=True))
    out = proc.stdout + proc.stderr
    result = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    assert result and result[0].startswith("RESULT failed"), out[-6000:]
    assert "'summary': 'failed'" in result[0] and "'model_chemo_counts': 'success'" in result[0]
    assert "MAPPED ['broken.yaml (not loaded)', 'chemo_mw']" in proc.stdout
    assert "match 2 patterns of chemo_mw in one pass" in out
    assert "broken.yaml:5: not valid YAML" in out
    runs = DeltaTable(str(tmp_path / "lake" / "runs")).to_pyarrow_table().to_pylist()
    assert sorted((r["pattern"], r["logical_date"], r["status"]) for r in runs) == [
        ("broken", "2010-08-30", "failed"), ("mw_chemo_any_p", "2010-08-30", "success"),
        ("mw_chemo_p1", "2010-08-30", "success")]


def test_dag_unreadable_landing_file_publishes_nothing(airflow_env, tmp_path):
    env = dict(airflow_env, **_profile(tmp_path))
    (tmp_path / "landing" / "chemo_mw" / "broken.csv.gz").write_bytes(b"not gzip at all")
    proc = python(env, dag_test())
    result = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    assert result and result[0].startswith("RESULT failed"), proc.stdout[-3000:]
    assert "'ingest': 'failed'" in result[0] and "'run_source': 'upstream_failed'" in result[0]
    assert "'summary': 'failed'" in result[0]
    assert "broken.csv.gz: cannot be read as csv" in proc.stdout + proc.stderr
    assert not (tmp_path / "lake" / "matches" / "mw_chemo_p1").exists()
    assert not (tmp_path / "lake" / "events" / "chemo_mw").exists()


def test_the_task_callable_retries_what_a_rerun_mends_and_fails_bad_input_at_once(
        airflow_env, tmp_path):
    """Through the DAG's own ``_job``: a step refused because the lake is busy exits 75 and
    the task raises a retryable error; a step given bad input exits 2 and the task fails
    without retries (AirflowFailException)."""
    conf = tmp_path / "pipeline.yaml"
    conf.write_text(f"profiles:\n  test:\n    landing: {ROOT / 'data' / 'landing'}\n"
                    f"    lake: {tmp_path / 'lake'}\n")
    env = dict(airflow_env, SES_PIPELINE_CONF=str(conf), SES_PROFILE="test")
    proc = python(env, """
        import importlib.util, json, sys
        spec = importlib.util.spec_from_file_location("dagfile", %r)
        dagfile = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(dagfile)
        from airflow.sdk.exceptions import AirflowFailException
        from jobs.lake.locks import lake_lock
        out = {}
        def outcome(*args):
            try:
                dagfile._job("r1", *args, spark=False)
                return "ok"
            except AirflowFailException as exc:
                return "final: " + str(exc)
            except RuntimeError as exc:
                return "retry: " + str(exc)
        args = ["retract", "--source", "chemo_mw", "--event-id", "e1", "--reason", "t"]
        with lake_lock(%r, "a test holding the lake"):
            out["busy"] = outcome(*args)
        out["bad"] = outcome("backfill", "--start", "2010-09-01", "--end", "2010-08-01")
        print(json.dumps(out))
    """ % (str(ROOT / "dags" / "ses_nightly.py"), str(tmp_path / "lake")))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["busy"].startswith("retry: ") and "another run is in progress" in out["busy"]
    assert "exit 75" in out["busy"]
    assert out["bad"].startswith("final: ") and "reversed" in out["bad"]
