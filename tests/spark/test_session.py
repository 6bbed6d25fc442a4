"""The one SparkSession: a missing Java is explained in one line; the archive of Spark's classes
is mapped by its JVM."""

import sys

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


def test_the_environment_maps_the_archive_of_sparks_classes(monkeypatch, tmp_path):
    """With an archive in the venv, a session's JVM gets it, an empty SPARK_CONF_DIR (a
    class path folder with files in it would stop the JVM from mapping it) and the
    project's log settings by name; without one, or with SPARK_CONF_DIR set by the
    caller, the environment is as before."""
    from jobs.config import current_project, load_profile
    from jobs.spark import cds
    from jobs.spark.session import spark_environment

    archive, empty = tmp_path / "spark-classes.jsa", tmp_path / "spark-conf"
    monkeypatch.setattr(cds, "ARCHIVE", archive)
    monkeypatch.setattr(cds, "EMPTY_CONF", empty)
    log = (current_project().conf / "spark" / "log4j2.properties").resolve().as_uri()
    profile = load_profile()

    env = spark_environment(profile, {"SPARK_SUBMIT_OPTS": "-XX:+UseParallelGC"})
    assert env["SPARK_CONF_DIR"] == str(current_project().conf / "spark")
    assert env["SPARK_SUBMIT_OPTS"] == "-XX:+UseParallelGC"

    archive.write_bytes(b"x")
    empty.mkdir()
    env = spark_environment(profile, {"SPARK_SUBMIT_OPTS": "-XX:+UseParallelGC"})
    assert env["SPARK_CONF_DIR"] == str(empty)
    assert env["SPARK_SUBMIT_OPTS"].split() == [
        "-XX:+UseParallelGC", f"-XX:SharedArchiveFile={archive}", "-Xshare:auto",
        "-Xlog:cds=off", "-Xlog:cds+dynamic=off", f"-Dlog4j2.configurationFile={log}"]

    (empty / "spark-defaults.conf").write_text("")  # not empty: the archive cannot map
    assert spark_environment(profile, {})["SPARK_CONF_DIR"] == str(current_project().conf / "spark")
    (empty / "spark-defaults.conf").unlink()
    assert spark_environment(profile, {"SPARK_CONF_DIR": "/mine"}) == {
        "SPARK_CONF_DIR": "/mine", "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}


def test_a_project_without_log_settings_gets_the_checkouts(monkeypatch, tmp_path):
    """A project made without ``conf/spark`` (a copy of conf/pipeline.yaml and the
    sources) logs as this checkout's settings say, not with log4j's complaint that the
    named file is missing."""
    from jobs.config.project import CHECKOUT, Project
    from jobs.spark import cds

    monkeypatch.setattr(cds, "current_project", lambda: Project(tmp_path))
    assert cds.log_settings() == CHECKOUT / "conf" / "spark" / "log4j2.properties"
    assert cds.log_settings().is_file()
    (tmp_path / "conf" / "spark").mkdir(parents=True)
    (tmp_path / "conf" / "spark" / "log4j2.properties").write_text("rootLogger.level = warn\n")
    assert cds.log_settings() == tmp_path / "conf" / "spark" / "log4j2.properties"


SESSION = """
from jobs.config import load_profile
from jobs.spark.session import build_session
spark = build_session(load_profile())
spark.range(3).count()
spark.stop()
"""


@pytest.mark.spark
def test_a_session_loads_sparks_classes_from_the_archive(tmp_path):
    """A fresh ``build_session`` in this venv maps the archive ``make`` built: its JVM
    loads Spark's classes from the shared archive, not from the jars, and still takes its
    log settings from conf/spark (its log file is made where SES_SPARK_LOG says)."""
    import os
    import subprocess

    from jobs.spark import cds

    if not cds.ARCHIVE.is_file():
        pytest.skip(f"no archive of Spark's classes in this venv: {cds.MANIFEST.read_text()}"
                    if cds.MANIFEST.is_file() else "make has not built the archive")
    loaded, log = tmp_path / "classes.txt", tmp_path / "spark.log"
    env = {k: v for k, v in os.environ.items() if k != "SPARK_CONF_DIR"}
    env.update(SPARK_SUBMIT_OPTS=f"-Xlog:class+load=info:file={loaded}", SES_SPARK_LOG=str(log))
    subprocess.run([sys.executable, "-c", SESSION], env=env, check=True, capture_output=True,
                   timeout=300)
    lines = [line for line in loaded.read_text().splitlines()
             if "org.apache.spark.SparkContext " in line]
    assert lines and "shared objects file (top)" in lines[0], lines
    assert log.is_file()


def test_the_daemon_puts_sparks_zips_last():
    from jobs.spark.daemon import without_zips

    lib = "/venv/site-packages/pyspark/python/lib"
    path = [f"{lib}/pyspark.zip", f"{lib}/py4j-0.10.9.9-src.zip", "/venv/site-packages",
            "/app/data.zip"]
    assert without_zips(path) == ["/venv/site-packages", "/app/data.zip",
                                  f"{lib}/pyspark.zip", f"{lib}/py4j-0.10.9.9-src.zip"]


def _pyspark_file(_):
    import pyspark

    yield pyspark.__file__


@pytest.mark.spark
def test_a_local_sessions_workers_import_the_installed_pyspark(spark):
    """The Python workers of a local session import PySpark from its installed package
    (compiled bytecode), not from the zip Spark puts first on their path (every module
    compiled from source in every worker)."""
    from jobs.spark.session import DAEMON

    assert spark.sparkContext.getConf().get(DAEMON) == "jobs.spark.daemon"
    files = spark.sparkContext.parallelize(range(2), 2).mapPartitions(_pyspark_file).collect()
    assert files and all(".zip" not in f and f.endswith("pyspark/__init__.py") for f in files)


@pytest.mark.spark
def test_dataframe_calls_record_no_call_site_and_errors_still_say_what(spark):
    """PySpark's DataFrame debugging is off (``DEBUG_FRAMES``): a Column or DataFrame call
    records no Python call site in the JVM (five JVM calls and a walk of the stack each);
    a query's error still names what is wrong."""
    from pyspark.errors import AnalysisException
    from pyspark.errors import utils as error_utils
    from pyspark.sql import functions as F

    from jobs.spark.session import DEBUG_FRAMES

    assert spark.conf.get(DEBUG_FRAMES) == "false"
    df = spark.range(3)
    assert df.where(F.col("id") > 0).count() == 2
    assert error_utils.is_debugging_enabled() is False
    with pytest.raises(AnalysisException, match="no_such_column"):
        df.select(F.col("no_such_column")).collect()
