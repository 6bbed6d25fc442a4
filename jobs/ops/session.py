"""One long-lived Spark application for a whole DAG run (``ses serve``).

Starting Spark, Great Expectations and the kernels costs a new process most of a pattern's
time (a cold JVM reads the events table's files, a new GX context, new Python workers):
run per task, the nightly DAG took several times ``make run``. So the DAG's first task
starts one server per DAG run on the worker host; every Spark step of the run (ingest,
each pattern's ``run-pattern``, the models) is sent to it over a Unix socket, runs in its
warm session exactly as ``ses …`` would, one step at a time (the steps write
the same lake), and its output streams back into the task's log line by line. The last
task stops it; it also stops itself after ``idle`` seconds without a request. When no
server answers (a retried task after the run ended, workers on other hosts), the client
runs the step with its own spark-submit, so the server only ever saves time.

Protocol: the client sends one JSON line ``{"argv": [...]}``; the server answers with the
step's output as text lines and ends with ``EXIT <code>``.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Callable

from jobs.config import load_profile
from jobs.progress import say

END = "\x00EXIT "


def socket_path(run_id: str) -> Path:
    """The socket of a DAG run's server (short: Unix socket paths are limited)."""
    return Path(tempfile.gettempdir()) / f"ses-{run_id}.sock"


class _Lines:
    """A text stream that sends each write to the client at once."""

    def __init__(self, conn: socket.socket):
        self.conn = conn

    def write(self, text: str) -> int:
        if text:
            with contextlib.suppress(OSError):  # a client that went away loses output only
                self.conn.sendall(text.encode("utf-8", "replace"))
        return len(text)

    def flush(self) -> None:
        pass


def serve(path: Path, main: Callable[[list[str]], int], idle: float = 900.0,
          profile: str | None = None) -> int:
    """Answer steps on ``path`` until ``stop`` or ``idle`` seconds without a request; the
    first step that needs Spark starts the session (``LazySession`` in the steps), and the
    steps after it find it warm. A night with nothing new never starts it. ``main`` runs
    one step's argv (the CLI hands in its own entry point, so this module does not import
    the CLI above it)."""
    load_profile(profile)  # a bad profile stops the server before it answers

    lock = threading.Lock()  # one step at a time: they write one lake
    last = [time.monotonic()]
    stopping = threading.Event()

    class Handler(socketserver.StreamRequestHandler):
        def handle(self) -> None:
            request = json.loads(self.rfile.readline() or b"{}")
            argv = [str(a) for a in request.get("argv", [])]
            out = _Lines(self.connection)
            if argv in (["stop"], ["ping"]):
                out.write(f"{END}0\n")
                if argv == ["stop"]:
                    stopping.set()
                return
            with lock:
                last[0] = time.monotonic()
                code = 1
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                    try:
                        code = int(main(argv) or 0)
                    except SystemExit as exc:  # argparse
                        code = exc.code if isinstance(exc.code, int) else 2
                    except BaseException:  # noqa: BLE001 - the step fails, the server lives
                        traceback.print_exc()
                        code = 1
                out.write(f"{END}{code}\n")
                last[0] = time.monotonic()

    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    server = socketserver.ThreadingUnixStreamServer(str(path), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"serving Spark steps on {path} (stops after {idle:.0f} s idle)", flush=True)
    try:
        while not stopping.wait(5):
            if time.monotonic() - last[0] > idle and not lock.locked():
                print("idle: stopping", flush=True)
                break
    finally:
        server.shutdown()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    return 0


def ask(path: Path, argv: list[str], echo=say) -> int | None:
    """Run ``argv`` on the server at ``path``; its output goes to ``echo`` line by line.
    None when no server answers there (the caller runs the step itself)."""
    if not path.exists():
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        return None
    with conn, conn.makefile("r", encoding="utf-8", errors="replace") as lines:
        conn.sendall((json.dumps({"argv": argv}) + "\n").encode())
        for line in lines:
            if line.startswith(END):
                return int(line[len(END):])
            echo(line.rstrip("\n"))
    raise ConnectionError(f"the Spark session at {path} went away during "
                          f"{' '.join(argv[:2])}")


def start(path: Path, env: dict, cwd: Path, python: str, log: Path,
          timeout: float = 120.0) -> bool:
    """Start a server in the background (its own session: it outlives the task) and wait
    until it answers; False if it did not come up (the steps then run on their own)."""
    import subprocess

    if ask(path, ["ping"], echo=lambda _: None) is not None:
        return True
    with open(log, "a") as out:
        # stdin from /dev/null: the task's own stdin is its socket to Airflow's supervisor,
        # which a child holding it would keep open (the task then waits for it to close)
        subprocess.Popen([python, "-m", "jobs", "serve", "--socket", str(path)], cwd=cwd,
                         env=env, stdin=subprocess.DEVNULL, stdout=out,
                         stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and ask(path, ["ping"], echo=lambda _: None) is not None:
            return True
        time.sleep(1)
    return False
