"""Every environment variable the project reads, read here and nowhere else (their list,
with what each does, is in docs/operations.md, "Environment variables"). Only the
standard library: every layer may import it."""

from __future__ import annotations

import os
import re

VARIABLES = {
    "SES_PROJECT_DIR": "the project folder (holding conf/pipeline.yaml) when --project-dir "
                       "is not given; default: the nearest folder above the current one "
                       "that holds conf/pipeline.yaml",
    "SES_PROFILE": "the profile of conf/pipeline.yaml when --profile is not given "
                   "(default: local)",
    "SES_PIPELINE_CONF": "another pipeline.yaml instead of the project's conf/pipeline.yaml",
    "SES_PATTERNS": "the DAG's pattern files: a glob, relative to the project or absolute",
    "SES_MODELS": "another folder of SQL models, relative to the project",
    "SES_KERNELS": "jit: Numba's just-in-time kernels instead of the ahead-of-time build",
    "SES_FAILPOINT": "fault tests: the named kill point at which the process dies",
    "SES_SPARK_LOG": "a file for Spark's full log (conf/spark/log4j2.properties)",
    "SES_ALERT_WEBHOOK": "a URL that receives one JSON POST per alert of a night (failures, "
                         "freshness, volume anomalies, held pattern changes), besides the "
                         "profile's alerts.webhooks",
    "JAVA_HOME": "the Java 17+ Spark runs on (default: java on the PATH)",
    "AIRFLOW_HOME": "Airflow's own: where the DAG's warm Spark session writes its log",
}


def get(name: str, default: str | None = None) -> str | None:
    """The value of one of ``VARIABLES`` (``default`` when it is not set or empty)."""
    if name not in VARIABLES:
        raise KeyError(f"{name} is not one of the project's environment variables: add it "
                       "to jobs.environment.VARIABLES and to docs/operations.md")
    return os.environ.get(name) or default


def export(name: str, value: str) -> None:
    """Set one of ``VARIABLES`` for the processes this one starts (Spark's Python workers,
    the steps' subprocesses), so that they see what this process chose."""
    get(name)  # only the project's own variables
    os.environ[name] = value


def expand(text: str) -> str:
    """``text`` with each ``${NAME}`` replaced by that environment variable (credentials
    in conf/ files stay out of git); raises ``ValueError`` naming a variable not set."""
    def var(m: re.Match) -> str:
        if m.group(1) not in os.environ:
            raise ValueError(f"the environment variable {m.group(1)} is not set")
        return os.environ[m.group(1)]

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", var, str(text))
