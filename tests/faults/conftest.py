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
        env = dict(self.env, **({"SES_FAILPOINT": failpoint} if failpoint else {}))
        return subprocess.run([sys.executable, "-m", "jobs", *map(str, args)], cwd=ROOT,
                              env=env, capture_output=True, text=True, timeout=timeout)

    def profile(self):
        from jobs.config import load_profile

        return load_profile("test", self.conf)


@pytest.fixture
def lake(tmp_path):
    return Lake(tmp_path)
