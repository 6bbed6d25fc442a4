"""The DAG run's warm Spark session (``jobs.ops.session``): steps sent over its socket run as
``python -m jobs`` would, one at a time, their output streams back, their exit codes
come back, and a client without a server is told so (it then runs the step itself)."""

import os
import subprocess
import sys
import threading
import time

import pytest

from jobs.cli.main import main
from jobs.ops.session import ask, serve, socket_path

from ..helpers import ROOT


def test_steps_run_in_the_session_one_at_a_time(spark, tmp_path):
    path = tmp_path / "s.sock"
    server = threading.Thread(target=serve, args=(path, main, 60.0), daemon=True)
    server.start()
    deadline = time.monotonic() + 60
    while ask(path, ["ping"], lambda _: None) is None:
        assert time.monotonic() < deadline, "the session did not come up"
        time.sleep(0.2)
    results = {}

    def client(name, argv):
        lines = []
        results[name] = (ask(path, argv, lines.append), lines)

    good = str(ROOT / "patterns" / "mw_chemo_p1.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsource: chemo_mw\nwithin: 1d\nsets: [[a]]\n")
    threads = [threading.Thread(target=client, args=("good", ["validate", good])),
               threading.Thread(target=client, args=("bad", ["validate", str(bad)])),
               threading.Thread(target=client, args=("usage", ["no-such-command"]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    code, lines = results["good"]
    assert code == 0 and lines == ["ok: 1 pattern file(s) valid, 2 example(s) pass"]
    code, lines = results["bad"]
    assert code == 1 and any("bad.yaml" in line for line in lines)
    assert not any("valid," in line for line in lines)  # outputs are not mixed
    assert results["usage"][0] == 2  # argparse's exit code, and the server lives on
    assert ask(path, ["stop"], print) == 0
    server.join(30)
    assert not server.is_alive() and not path.exists()


def test_the_server_holds_none_of_the_starting_task_s_streams(tmp_path):
    """Airflow's supervisor talks to a task over its stdin: the server it starts (which
    outlives the task) must not keep that stream open, or the task's worker waits for it."""
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nreadlink /proc/self/fd/0 > \"$0.stdin\"\n")
    fake.chmod(0o755)
    code = ("import os, sys\nfrom pathlib import Path\nfrom jobs.ops.session import start\n"
            f"t = Path({str(tmp_path)!r})\n"
            "print(start(t / 'x.sock', dict(os.environ), t, str(t / 'python'), t / 'log', "
            "timeout=2))\n")
    # the task's stdin is a pipe, as a supervisor's socket is
    task = subprocess.run([sys.executable, "-c", code], stdin=subprocess.PIPE, cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert task.stdout.strip() == "False", task.stderr  # the fake never serves
    deadline = time.monotonic() + 10
    while not (tmp_path / "python.stdin").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (tmp_path / "python.stdin").read_text().strip() == "/dev/null"


def test_no_session_means_the_caller_runs_the_step(tmp_path):
    assert ask(tmp_path / "none.sock", ["validate"], print) is None
    assert socket_path("20261122T020000Z-abcdef").name == "ses-20261122T020000Z-abcdef.sock"


WORKER_SCRIPT = """
import sys
from pathlib import Path
from jobs.config import Profile
from jobs.spark.session import build_session

tmp = Path(sys.argv[1])
conf = {"spark.executor.pyspark.memory": "1g", "spark.ui.enabled": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true"}
spark = build_session(Profile(name="t", landing=str(tmp), lake=str(tmp / "lake"),
                              spark_master="local[1]", spark_conf=conf), "banners")

def said(batches):
    for b in batches:
        print("a line of the worker", file=sys.stderr, flush=True)
        yield b

print(spark.range(3).mapInPandas(said, "id long").count())
spark.stop()
"""


@pytest.mark.spark
@pytest.mark.slow
def test_a_local_run_drops_the_python_workers_memory_banners(tmp_path):
    """With spark.executor.pyspark.memory set, every new Python worker prints its memory
    limit; on a local master that reached the console of `ses run`. It is dropped there,
    and any other line of a worker still comes through."""
    script = tmp_path / "banners.py"
    script.write_text(WORKER_SCRIPT)
    out = subprocess.run([sys.executable, str(script), str(tmp_path)], cwd=ROOT,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "3"
    assert "a line of the worker" in out.stderr
    assert "mem limits" not in out.stderr
