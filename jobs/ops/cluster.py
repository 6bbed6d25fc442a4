"""A Spark standalone cluster on this machine (``make cluster-up`` / ``make cluster-down``):
one master and two workers, each its own JVM started from the venv's pyspark with
``spark-class`` (pip's pyspark has no ``sbin/start-master.sh``), bound to 127.0.0.1.
Pids and logs live in ``.spark-cluster/``; the master's JSON status page tells when the
workers have registered. The profile ``standalone`` of ``conf/pipeline.yaml`` submits to
it; the executors import the project from the zip ``spark.build_session`` ships.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from jobs.config import current_project
from jobs.core.errors import UserError
from jobs.progress import say

HOST = "127.0.0.1"
MASTER_PORT = 7077
MASTER_UI = 8090
WORKERS = 2
WORKER_CORES = 1  # 2 cores: one per worker
WORKER_MEMORY = "8g"  # 24 GB: two workers' executors, and the driver beside them


class ClusterError(UserError, RuntimeError):
    """The cluster did not come up; the message names the log to read."""


def _state() -> Path:
    """Where the standalone cluster keeps its logs, pid files and work folders."""
    return current_project().root / ".spark-cluster"


def master_url() -> str:
    return f"spark://{HOST}:{MASTER_PORT}"


def _spark_class() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return os.path.join(_find_spark_home(), "bin", "spark-class")


def _env() -> dict:
    env = dict(os.environ)
    env.update(SPARK_LOCAL_IP=HOST, SPARK_CONF_DIR=str(current_project().conf / "spark"),
               PYSPARK_PYTHON=sys.executable, SPARK_NO_DAEMONIZE="1")
    return env


def status(timeout: float = 2.0) -> dict | None:
    """The master's status (``workers``, ``aliveworkers``, ...), or None when it is down
    or still starting (its web UI may answer with an HTML page before the JSON one is
    served)."""
    try:
        with urllib.request.urlopen(f"http://{HOST}:{MASTER_UI}/json/", timeout=timeout) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


def _start(name: str, args: list[str]) -> None:
    _state().mkdir(exist_ok=True)
    log = open(_state() / f"{name}.log", "ab")  # noqa: SIM115 - the child keeps it open
    proc = subprocess.Popen([_spark_class(), *args], stdout=log, stderr=subprocess.STDOUT,
                            env=_env(), start_new_session=True, cwd=_state())
    (_state() / f"{name}.pid").write_text(str(proc.pid))


def up(workers: int = WORKERS, wait: float = 120.0, echo=say) -> dict:
    """Start the master and ``workers`` workers (nothing if they are up already); returns
    the master's status once every worker is alive."""
    now = status()
    if now and now.get("aliveworkers", 0) >= workers:
        echo(f"cluster already up: {master_url()}, {now['aliveworkers']} worker(s)")
        return now
    if now is None:
        _start("master", ["org.apache.spark.deploy.master.Master", "--host", HOST, "--port",
                          str(MASTER_PORT), "--webui-port", str(MASTER_UI)])
    for i in range(1, workers + 1):
        if not _alive(_state() / f"worker{i}.pid"):
            _start(f"worker{i}", ["org.apache.spark.deploy.worker.Worker", master_url(),
                                  "--host", HOST, "--cores", str(WORKER_CORES), "--memory",
                                  WORKER_MEMORY, "--webui-port", str(MASTER_UI + i),
                                  "--work-dir", str(_state() / f"work{i}")])
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        now = status()
        if now and now.get("aliveworkers", 0) >= workers:
            echo(f"cluster up: {master_url()} (UI http://{HOST}:{MASTER_UI}), "
                 f"{now['aliveworkers']} worker(s) of {WORKER_CORES} core(s), {WORKER_MEMORY}")
            return now
        time.sleep(1)
    down(echo=lambda *_: None)
    raise ClusterError(f"the cluster did not come up within {wait:.0f} s: read "
                       f"{_state()}/master.log and {_state()}/worker1.log")


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs; a child of this process that exited is reaped (a zombie
    answers signal 0 as if it were alive, which made ``down`` wait its full 15 s)."""
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return False
    except ChildProcessError:
        pass  # not our child: its parent reaps it
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _alive(pidfile: Path) -> bool:
    try:
        return _running(int(pidfile.read_text()))
    except (OSError, ValueError):
        return False


def down(echo=say) -> int:
    """Stop every process ``up`` started (TERM, then KILL after 15 s); returns how many."""
    stopped = 0
    for pidfile in sorted(_state().glob("*.pid")) if _state().is_dir() else []:
        try:
            pid = int(pidfile.read_text())
            os.killpg(pid, signal.SIGTERM)
            for _ in range(150):
                if not _running(pid):
                    break
                time.sleep(0.1)
            else:
                os.killpg(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass
        pidfile.unlink(missing_ok=True)
        stopped += 1
    echo(f"cluster down ({stopped} process(es) stopped)" if stopped else "no cluster running")
    return stopped
