"""The one SparkSession's preconditions: a missing Java is explained in one line."""

import pytest


def test_java_missing_is_explained(monkeypatch, tmp_path):
    from jobs.spark.session import JavaMissing, check_java

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    with pytest.raises(JavaMissing, match="Java 17 or newer.*openjdk-17-jre-headless"):
        check_java()


def test_the_workers_banners_leave_no_blank_lines(tmp_path):
    """PySpark's workers print their memory banners with two newlines: the filter drops
    each banner and the empty line after it, and nothing else."""
    import os
    import threading

    from jobs.spark.session import WORKER_BANNERS, _pass_lines

    read, write = os.pipe()
    out = tmp_path / "err"
    with open(out, "wb") as f:
        t = threading.Thread(target=_pass_lines, args=(read, f.fileno(), WORKER_BANNERS))
        t.start()
        os.write(write, b"Current mem limits: -1 of max -1\n\nSetting mem limits to 6 of max 6"
                        b"\n\nreal line\n\nafter an empty one\n")
        os.close(write)
        t.join(5)
    assert out.read_bytes() == b"real line\n\nafter an empty one\n"


def test_a_session_started_soon_is_built_once_on_its_own_thread(monkeypatch):
    """``start_soon`` builds the session on a thread while the caller goes on; ``get``
    waits for that build and returns its session; a second call builds nothing more. (The
    build is counted, not run: what is tested is the lazy session's threading.)"""
    import threading
    import time

    from jobs.config import load_profile
    from jobs.spark import session

    built, release = [], threading.Event()

    def build(profile, app_name):
        built.append(threading.current_thread().name)
        release.wait(5)
        return object()

    monkeypatch.setattr(session, "build_session", build)
    lazy = session.LazySession(load_profile())
    lazy.start_soon()
    time.sleep(0.05)
    assert built == ["spark-start"] and not lazy.started  # building, the caller goes on
    release.set()
    first = lazy.get()
    lazy.start_soon()
    assert lazy.get() is first and built == ["spark-start"] and lazy.started
