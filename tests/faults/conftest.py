import contextlib
import io
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
P1 = ROOT / "patterns" / "mw_chemo_p1.yaml"


class Lake:
    """A private landing folder, lake and pipeline.yaml, and ``python -m jobs`` on them."""

    def __init__(self, tmp: Path, budget: str = "2GB"):
        self.tmp = tmp
        self.landing = tmp / "landing"
        shutil.copytree(ROOT / "data" / "landing" / "chemo_mw", self.landing / "chemo_mw")
        self.root = tmp / "lake"
        self.conf = tmp / "pipeline.yaml"
        self.conf.write_text(textwrap.dedent(f"""\
            profiles:
              test:
                landing: {self.landing}
                lake: {self.root}
                spark:
                  master: local[2]
                  conf: {{spark.sql.shuffle.partitions: "2", spark.ui.enabled: "false",
                          spark.ui.showConsoleProgress: "false",
                          spark.sql.session.timeZone: UTC}}
                match: {{allowed_lateness: 0s, slice_length: 7d, memory_budget: {budget}}}
            """))
        self.env = dict(os.environ, SES_PIPELINE_CONF=str(self.conf), SES_PROFILE="test",
                        PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        self.env.pop("SES_FAILPOINT", None)

    def jobs(self, *args, failpoint: str | None = None, timeout: int = 600):
        """``python -m jobs --project-dir ROOT *args`` in a subprocess started in another
        folder (this lake's): the project comes from ``--project-dir``, not from where
        the command stands."""
        env = dict(self.env, **({"SES_FAILPOINT": failpoint} if failpoint else {}))
        return subprocess.run([sys.executable, "-m", "jobs", "--project-dir", str(ROOT),
                               *map(str, args)], cwd=self.tmp, env=env, capture_output=True,
                              text=True, timeout=timeout)

    def here(self, spark, *args) -> subprocess.CompletedProcess:
        """``python -m jobs *args`` in this process, on the test run's SparkSession (the
        command's ``getOrCreate`` finds it): what a rerun after a fault needs, without a
        new JVM. The environment and the session's Spark settings are put back afterwards."""
        from jobs.cli.main import main

        saved = {k: spark.conf.get(k, None) for k in self.profile().spark_conf}
        out, err = io.StringIO(), io.StringIO()
        try:
            with pytest.MonkeyPatch.context() as env, contextlib.redirect_stdout(out), \
                    contextlib.redirect_stderr(err):
                env.setenv("SES_PIPELINE_CONF", str(self.conf))
                env.setenv("SES_PROFILE", "test")
                env.delenv("SES_FAILPOINT", raising=False)
                code = main([str(a) for a in args])
        finally:
            for k, v in saved.items():
                if not spark.conf.isModifiable(k) or spark.conf.get(k, None) == v:
                    continue
                if v is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, v)
        return subprocess.CompletedProcess(["ses", *map(str, args)], code, out.getvalue(),
                                           err.getvalue())

    def profile(self):
        from jobs.config import load_profile

        return load_profile("test", self.conf)


@pytest.fixture
def lake(tmp_path):
    return Lake(tmp_path)
