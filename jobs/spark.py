"""The one place that builds the SparkSession, from the profile in ``conf/pipeline.yaml``."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from .config import CONF, ROOT, Profile


class JavaMissing(RuntimeError):
    pass


def check_java() -> str:
    """Spark needs Java 17 or newer; say how to get it instead of a Py4J stack trace."""
    java = os.path.join(os.environ["JAVA_HOME"], "bin", "java") if os.environ.get("JAVA_HOME") \
        else shutil.which("java")
    how = ("install it (Debian/Ubuntu: sudo apt-get install -y openjdk-17-jre-headless) "
           "or point JAVA_HOME at a Java 17+ installation")
    if not java or not os.path.exists(java):
        raise JavaMissing(f"Spark needs Java 17 or newer and none was found: {how}")
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except OSError as exc:
        raise JavaMissing(f"cannot run {java}: {exc}; {how}") from None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    major = int(m.group(1)) if m else 0
    if major == 1 and m.group(2):  # "1.8" style
        major = int(m.group(2))
    if major < 17:
        raise JavaMissing(f"Spark needs Java 17 or newer, {java} is Java {major or '?'}: {how}")
    return java


def spark_environment(profile: Profile, env=os.environ) -> dict:
    """What the Spark JVM and its Python workers need from the environment, set where the
    caller has not: the venv's interpreter, the project's log settings (``conf/spark``:
    warnings and errors only) and, for a local master, the loopback address."""
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    env.setdefault("SPARK_CONF_DIR", str(CONF / "spark"))
    if profile.spark_master.startswith("local"):
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env


def submit_command(profile: Profile, spark_submit: str, entry: str, args: list[str],
                   app_name: str = "ses-lakehouse") -> list[str]:
    """``spark-submit`` of ``entry`` with ``args`` on the profile's master, with its Spark
    settings on the command line (where settings of the driver's own JVM, such as
    ``spark.driver.memory``, take effect) and, for a master with executors in other
    processes, the ``jobs`` package for them."""
    cmd = [spark_submit, "--master", profile.spark_master, "--name", app_name]
    for key, value in profile.spark_conf.items():
        cmd += ["--conf", f"{key}={value}"]
    if not profile.spark_master.startswith("local"):
        cmd += ["--py-files", project_zip()]
    return cmd + [entry, *args]


def build_session(profile: Profile, app_name: str = "ses-lakehouse"):
    """A SparkSession for the profile; Python workers use this interpreter (the venv)."""
    check_java()
    spark_environment(profile)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(profile.spark_master).appName(app_name)
    for key, value in profile.spark_conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if not profile.spark_master.startswith("local"):  # executors in other processes
        spark.sparkContext.addPyFile(project_zip())
    return spark


def project_zip() -> str:
    """The ``jobs`` package as a zip, for executors that do not share the driver's
    working directory (a cluster's): ``SparkContext.addPyFile`` puts it on their path."""
    import tempfile
    import zipfile
    from pathlib import Path

    out = Path(tempfile.gettempdir()) / f"ses-jobs-{os.getpid()}.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for p in sorted((ROOT / "jobs").rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                z.write(p, p.relative_to(ROOT))
    return str(out)
