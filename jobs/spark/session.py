"""The one place that builds the SparkSession, from the profile in ``conf/pipeline.yaml``."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import zipfile
from contextlib import contextmanager
from pathlib import Path

from jobs import environment
from jobs.config import ConfigError, Profile, current_project
from jobs.core.errors import UserError
from jobs.lake.paths import OBJECT_STORES, s3_settings
from jobs.spark import cds

S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem"
DAEMON = "spark.python.daemon.module"
# PySpark's DataFrame debugging (on by default) records the Python call site of every
# DataFrame and Column call, with five calls to the JVM each (the session, its settings,
# the origin set and cleared) and a walk of the stack: thousands of calls a night on the
# driver. Off, an error in a query still names the query and its plan.
DEBUG_FRAMES = "spark.python.sql.dataFrameDebugging.enabled"
SECRETS = {"access_key": "spark.hadoop.fs.s3a.access.key",  # lake.s3_settings -> s3a
           "secret_key": "spark.hadoop.fs.s3a.secret.key",
           "session_token": "spark.hadoop.fs.s3a.session.token"}


class JavaMissing(UserError, RuntimeError):
    pass


class ObjectStoreUnsupported(ConfigError):
    """The lake is on an object store and this Spark cannot read it (no ``s3a``)."""


def check_java() -> str:
    """Spark needs Java 17 or newer; say how to get it instead of a Py4J stack trace."""
    home = environment.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
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
    warnings and errors only), the archive of Spark's classes when the venv has one
    (``cds``: the driver's JVM starts 2 s sooner) and, for a local master, the loopback
    address."""
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if "SPARK_CONF_DIR" not in env:
        settings = cds.log_settings()
        shared = cds.java_options(settings)
        if shared is None:
            env["SPARK_CONF_DIR"] = str(settings.parent if settings
                                        else current_project().conf / "spark")
        else:
            env["SPARK_CONF_DIR"] = str(cds.EMPTY_CONF)
            env["SPARK_SUBMIT_OPTS"] = f"{env.get('SPARK_SUBMIT_OPTS', '')} {shared}".strip()
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
    for key, value in session_conf(profile).items():
        if key not in SECRETS.values():  # not on a command line: s3a reads them from the environment
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
    for key, value in session_conf(profile).items():
        builder = builder.config(key, value)
    if profile.spark_master.startswith("local"):  # the workers' stderr is this console
        with jvm_stderr_without(WORKER_BANNERS):
            spark = builder.getOrCreate()
    else:
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    require_object_store(spark, profile)
    if not profile.spark_master.startswith("local"):  # executors in other processes
        spark.sparkContext.addPyFile(project_zip())
    return spark


class LazySession:
    """The profile's SparkSession, built on first use: a night with nothing new (no new
    events, no pattern whose range holds an event, no model whose inputs changed) never
    starts a JVM. Stands for the session everywhere (attributes are the session's);
    ``started`` says whether it was built."""

    def __init__(self, profile: Profile, app_name: str = "ses-lakehouse"):
        self._profile, self._app_name = profile, app_name
        self._session = None
        self._lock = threading.Lock()

    @property
    def started(self) -> bool:
        return self._session is not None

    def get(self):
        with self._lock:
            if self._session is None:
                self._session = build_session(self._profile, self._app_name)
            return self._session

    def start_soon(self) -> None:
        """Start building the session on a thread of its own (the JVM's start overlaps
        what the caller does next; ``get`` waits for it)."""
        if self._session is None:
            threading.Thread(target=self._start_quietly, name="spark-start",
                             daemon=True).start()

    def _start_quietly(self) -> None:
        try:
            self.get()
        except Exception:  # noqa: BLE001 - the caller's own get() raises it again
            pass

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.get(), name)


# what every new Python worker prints when spark.executor.pyspark.memory is set (the
# limit that keeps a worker from taking the machine): noise on the console of `ses run`
WORKER_BANNERS = (b"Current mem limits:", b"Setting mem limits to ")


@contextmanager
def jvm_stderr_without(prefixes: tuple[bytes, ...]):
    """A JVM started inside this block (and the Python workers it starts) writes its
    stderr through a pipe that drops the lines starting with ``prefixes`` and passes every
    other byte on to this process's stderr, at once (a partial line too, unless it could
    still become a dropped one). This process's own stderr is left as it is."""
    read, write = os.pipe()
    saved = os.dup(2)
    target = os.dup(2)  # where the JVM's other lines go, for its whole life
    os.dup2(write, 2)
    os.close(write)
    threading.Thread(target=_pass_lines, args=(read, target, prefixes), daemon=True,
                     name="jvm stderr").start()
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _pass_lines(read: int, target: int, prefixes: tuple[bytes, ...]) -> None:
    """Copy ``read`` to ``target`` without the lines that start with ``prefixes`` and the
    empty line right after each (PySpark prints its banners with two newlines)."""
    pending = b""
    dropped = False  # the line before was a banner
    while chunk := os.read(read, 65536):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        kept = []
        for line in lines:
            banner = line.startswith(prefixes)
            if not banner and not (dropped and not line):
                kept.append(line + b"\n")
            dropped = banner
        out = b"".join(kept)
        if pending and not any(p.startswith(pending) or pending.startswith(p)
                               for p in prefixes):
            out, pending = out + pending, b""
        if out:
            os.write(target, out)
    if pending and not pending.startswith(prefixes):
        os.write(target, pending)


def session_conf(profile: Profile) -> dict[str, str]:
    """The profile's Spark settings; PySpark's DataFrame debugging off (``DEBUG_FRAMES``);
    for a local master, the project's Python daemon
    (``jobs.spark.daemon``: PySpark from its installed package, not its zip); for a lake on
    an object store, Hadoop's ``s3a`` settings for the same store as its delta-rs
    ``storage_options`` (endpoint, path-style access, plain HTTP, region, credentials). A
    setting in the profile wins."""

    own = {DEBUG_FRAMES: "false"}
    if profile.spark_master.startswith("local"):
        own[DAEMON] = "jobs.spark.daemon"
    if not profile.lake.startswith(OBJECT_STORES):
        return {**own, **profile.spark_conf}
    s = s3_settings(profile.storage_options)
    conf = {"spark.hadoop.fs.s3.impl": S3A}  # delta-rs lists its files as s3://
    if s["endpoint"]:
        conf["spark.hadoop.fs.s3a.endpoint"] = s["endpoint"]
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
    if s["http"]:
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = "false"
    if s["region"]:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = s["region"]
    conf.update({key: s[name] for name, key in SECRETS.items() if s[name]})
    return {**own, **conf, **profile.spark_conf}


def require_object_store(spark, profile: Profile) -> None:
    """Fail fast, before any step, when the lake is on an object store and this Spark has
    no ``s3a`` filesystem (the hadoop-aws jars, which are not part of pyspark); the
    message says which jars and settings it needs."""
    from py4j.protocol import Py4JJavaError


    if not profile.lake.startswith(OBJECT_STORES):
        return
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName(S3A, False,
                                    jvm.java.lang.Thread.currentThread().getContextClassLoader())
        return
    except Py4JJavaError:
        pass
    hadoop = jvm.org.apache.hadoop.util.VersionInfo.getVersion()
    raise ObjectStoreUnsupported(
        f"profile {profile.name}: the lake {profile.lake} is on an object store, and Spark "
        f"reads it through Hadoop's s3a filesystem ({S3A}), which this Spark does not have. "
        f"Put hadoop-aws-{hadoop}.jar (the version of pyspark's Hadoop, {hadoop}) and the "
        "AWS SDK v2 bundle jar it depends on (software.amazon.awssdk:bundle) on the "
        f"classpath: `spark.jars: /path/to/hadoop-aws-{hadoop}.jar,/path/to/bundle-<version>"
        ".jar` in the profile's spark.conf, or `spark.jars.packages: "
        f"org.apache.hadoop:hadoop-aws:{hadoop}` where Maven Central is reachable. The s3a "
        "endpoint, region and credentials come from the profile's storage_options "
        "(docs/cluster.md: 'Lakes on object storage')")


def project_zip() -> str:
    """The ``jobs`` package as a zip, for executors that do not share the driver's
    working directory (a cluster's): ``SparkContext.addPyFile`` puts it on their path.
    Named by its content, so that every driver of one version of the code shares one
    file (the CLI leaves without ``atexit`` once delta-rs is loaded, and a file per
    process was left behind by each): written once, atomically, never changed after."""
    package = Path(__file__).resolve().parents[1]  # the jobs package itself
    files = [p for p in sorted(package.rglob("*"))
             if p.is_file() and "__pycache__" not in p.parts]
    digest = hashlib.sha256()
    for p in files:
        digest.update(str(p.relative_to(package.parent)).encode() + b"\0" + p.read_bytes())
    out = Path(tempfile.gettempdir()) / f"ses-jobs-{digest.hexdigest()[:16]}.zip"
    if not out.exists():
        part = out.with_name(f"{out.stem}.{os.getpid()}.part")
        with zipfile.ZipFile(part, "w", zipfile.ZIP_DEFLATED) as z:
            for p in files:
                z.write(p, p.relative_to(package.parent))
        os.replace(part, out)
    return str(out)


EVENTS_PER_TASK = 500_000  # events per phase-2 task, at least


def match_tasks(spark, events: int) -> int:
    """The phase-2 tasks of a match job or source pass over ``events``: one per core at
    least, one per ``EVENTS_PER_TASK`` events, at most
    ``spark.sql.shuffle.partitions``. Each task costs each pattern a matcher call per
    batch and an output file, so a small source gets as many tasks as cores, not the
    shuffle's default."""
    most = int(spark.conf.get("spark.sql.shuffle.partitions"))
    return max(1, min(most, max(cores(spark), -(-events // EVENTS_PER_TASK))))


def cores(spark) -> int:
    """The task slots of the session: local[N] (``*``: this machine's cores), else the
    cluster's default parallelism."""
    sc = spark.sparkContext
    m = re.fullmatch(r"local(?:\[(\*|\d+)(?:,\d+)?\])?", sc.master)
    if m is None:
        return sc.defaultParallelism
    if m.group(1) == "*":
        return os.cpu_count() or 1
    return int(m.group(1) or 1)
