"""The nightly Airflow run against ``make run`` on the committed data (docs/operations.md's target:
within 1.5x), and the night after it, with nothing new (the target: <= 30 s through the
DAG, <= 10 s for ``ses run``).

Both start from an empty lake of their own (every pattern is a full recompute):
``python -m jobs run`` (what ``make run`` runs after ``validate``), then the DAG under a real
``airflow standalone`` (scheduler, DAG processor, API server; LocalExecutor with the
settings of ``make airflow``), triggered from the CLI for yesterday's logical date, timed
from the trigger to the run's end; then each again for today's date, with no new file (an
empty night). Prints a table and writes bench/out/airflow_run.json.

    .venv/bin/python bench/airflow_run.py [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / ".venv" / "bin"


def profile(folder: Path) -> Path:
    """conf/pipeline.yaml with the local profile's lake moved to ``folder``."""
    text = (ROOT / "conf" / "pipeline.yaml").read_text()
    conf = folder / "pipeline.yaml"
    text = text.replace("    lake: lake ", f"    lake: {folder / 'lake'} ", 1)
    text = text.replace("    site: site ", f"    site: {folder / 'site'} ", 1)
    # no schedule: the only run is the one the benchmark triggers
    conf.write_text(text.replace('  schedule: "0 2 * * *"', "  schedule: null", 1))
    return conf


TODAY = date.today()
NIGHTS = [(TODAY - timedelta(days=1)).isoformat(), TODAY.isoformat()]  # first, then empty


def make_run(folder: Path, day: str) -> float:
    env = dict(os.environ, SES_PIPELINE_CONF=str(profile(folder)))
    t0 = time.perf_counter()
    subprocess.run([str(BIN / "python"), "-m", "jobs", "run", "--logical-date", day], cwd=ROOT,
                   env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def airflow_run(folder: Path, timeout: float = 1800) -> list[tuple[float, str, dict]]:
    home = folder / "airflow"
    env = dict(os.environ, SES_PIPELINE_CONF=str(profile(folder)), AIRFLOW_HOME=str(home),
               PATH=f"{BIN}:{os.environ['PATH']}",
               AIRFLOW__CORE__DAGS_FOLDER=str(ROOT / "dags"),
               AIRFLOW__CORE__LOAD_EXAMPLES="False", AIRFLOW__CORE__PARALLELISM="4",
               AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG="2",
               AIRFLOW__API__HOST="127.0.0.1", AIRFLOW__API__PORT="8795",
               AIRFLOW__CORE__EXECUTION_API_SERVER_URL="http://127.0.0.1:8795/execution/",
               AIRFLOW__SCHEDULER__DAG_DIR_LIST_INTERVAL="5")

    def airflow(*args: str) -> str:
        return subprocess.run([str(BIN / "airflow"), *args], env=env, capture_output=True,
                              text=True, check=True).stdout

    log = open(folder / "standalone.log", "w")
    server = subprocess.Popen([str(BIN / "airflow"), "standalone"], env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 180
        while "ses_nightly" not in _safe(airflow, "dags", "list"):
            if time.time() > deadline or server.poll() is not None:
                raise RuntimeError(f"airflow standalone did not list the DAG: {folder}/standalone.log")
            time.sleep(3)
        airflow("dags", "unpause", "ses_nightly")
        out = []
        for day in NIGHTS:
            t0 = time.perf_counter()
            airflow("dags", "trigger", "ses_nightly", "--logical-date", f"{day}T00:00:00+00:00")
            state, run = "queued", None
            while state in ("queued", "running") and time.perf_counter() - t0 < timeout:
                time.sleep(1)
                runs = _json(airflow("dags", "list-runs", "ses_nightly", "-o", "json"))
                run = next((r for r in runs if str(r.get("logical_date", "")).startswith(day)),
                           None)
                state = run["state"] if run else "queued"
            seconds = time.perf_counter() - t0
            tasks = _json(_safe(airflow, "tasks", "states-for-dag-run", "ses_nightly",
                                run["run_id"], "-o", "json")) if run else []
            states: dict[str, int] = {}
            for t in tasks:
                states[t.get("state")] = states.get(t.get("state"), 0) + 1
            out.append((seconds, state, states))
        return out
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()


def _json(out: str) -> list:
    """The JSON list of an ``airflow … -o json`` (warnings may come first on stdout)."""
    lines = [ln for ln in out.splitlines() if ln.startswith("[")]
    return json.loads(lines[-1]) if lines else []


def _safe(fn, *args) -> str:
    try:
        return fn(*args)
    except subprocess.CalledProcessError:
        return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the scratch folders")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="ses-airflow-bench-"))
    (scratch / "make").mkdir()
    (scratch / "dag").mkdir()
    print(f"scratch: {scratch}")
    print("make run (python -m jobs run) …", flush=True)
    local, empty = (make_run(scratch / "make", day) for day in NIGHTS)
    print(f"  {local:.0f} s; the empty night after it {empty:.1f} s")
    print("Airflow (standalone, LocalExecutor, 2 tasks at a time) …", flush=True)
    (seconds, state, states), (empty_dag, empty_state, empty_states) = airflow_run(scratch / "dag")
    print(f"  {seconds:.0f} s, run {state}, tasks {states}")
    print(f"  the empty night: {empty_dag:.0f} s, run {empty_state}, tasks {empty_states}")
    out = {"make_run_seconds": round(local, 1), "airflow_seconds": round(seconds, 1),
           "ratio": round(seconds / local, 2), "airflow_state": state, "task_states": states,
           "empty_night": {"ses_run_seconds": round(empty, 1),
                           "airflow_seconds": round(empty_dag, 1), "airflow_state": empty_state,
                           "task_states": empty_states}}
    state = state if empty_state == "success" else empty_state
    print(json.dumps(out))
    (ROOT / "bench" / "out").mkdir(parents=True, exist_ok=True)
    (ROOT / "bench" / "out" / "airflow_run.json").write_text(json.dumps(out, indent=1))
    if not args.keep:
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if state == "success" else 1


if __name__ == "__main__":
    sys.exit(main())
