"""The nightly SES pipeline: ingest -> per pattern (match -> validate -> publish) -> summary.

Thin on purpose: parsing this file reads ``conf/pipeline.yaml`` (schedule, retries) and
nothing else; the work runs in the project's jobs, started from the project's venv with
spark-submit as ``make run`` does (``spark_entry.py``). Patterns are listed when a run
starts (``patterns/*.yaml`` and ``*.yml``), so a new pattern file joins the next run without touching
this file. Every step is idempotent by logical date: the staging run id is derived from it
and publishing MERGEs by match_id.

After the pattern groups, one task per SQL model of ``models/`` (in dependency order):
each builds, tests and publishes its table; a model's task waits for the models it reads.

Environment: SES_PROFILE (profile in conf/pipeline.yaml), SES_PIPELINE_CONF (another
pipeline.yaml), SES_PATTERNS (a glob, relative to the project, instead of patterns/*.yaml and
*.yml), SES_MODELS (a folder, relative to the project, instead of models/).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml
from airflow.sdk import dag, task, task_group

PROJECT = Path(__file__).resolve().parent.parent
VENV_BIN = PROJECT / ".venv" / "bin"


def _settings() -> dict:
    path = Path(os.environ.get("SES_PIPELINE_CONF", PROJECT / "conf" / "pipeline.yaml"))
    with open(path, encoding="utf-8") as f:
        return (yaml.safe_load(f) or {}).get("airflow") or {}


SETTINGS = _settings()


def _job(*args: str, spark: bool = True) -> str:
    """Run one step the way `make run` does (with spark-submit, or plain Python for a step
    without Spark); fail the task with the step's own message."""
    import subprocess

    env = dict(os.environ, PYSPARK_PYTHON=str(VENV_BIN / "python"),
               PYSPARK_DRIVER_PYTHON=str(VENV_BIN / "python"))
    cmd = ([str(VENV_BIN / "spark-submit"), "--master", "local[*]",
            str(PROJECT / "spark_entry.py"), *args] if spark
           else [str(VENV_BIN / "python"), "-m", "jobs", *args])
    proc = subprocess.run(cmd, cwd=PROJECT, env=env, capture_output=True, text=True)
    out = "\n".join(line for line in (proc.stdout + proc.stderr).splitlines()
                    if " WARN " not in line and "log4j" not in line)
    print(out)
    if proc.returncode != 0:
        errors = [line for line in out.splitlines() if line.startswith("error:")]
        raise RuntimeError(errors[-1] if errors else f"{' '.join(args)} exited with "
                           f"{proc.returncode}")
    return out


def _models() -> tuple[list[tuple[str, tuple[str, ...]]], str | None]:
    """(name, models it depends on) of every SQL model, in dependency order; reads only
    the files of models/ (or SES_MODELS). A broken model folder gives one failing task
    with the message, not a DAG that does not import."""
    import sys

    sys.path.insert(0, str(PROJECT))
    from jobs.models import ModelError, load_models

    try:
        return [(m.name, m.depends_on) for m in load_models()], None
    except (ModelError, OSError) as exc:
        return [], str(exc)


@dag(
    dag_id="ses_nightly",
    schedule=SETTINGS.get("schedule", "0 2 * * *"),
    start_date=datetime.fromisoformat(SETTINGS.get("start_date", "2026-11-01")).replace(
        tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": int(SETTINGS.get("retries", 2)),
                  "retry_delay": timedelta(minutes=int(SETTINGS.get("retry_delay_minutes", 5)))},
    tags=["ses", "lakehouse"],
    doc_md=__doc__,
)
def ses_nightly():
    @task
    def list_patterns() -> list[str]:
        """Every pattern file (``*.yaml`` and ``*.yml``): a file that does not load or
        whose name another file uses fails its own match task, with a row in the log."""
        import sys

        sys.path.insert(0, str(PROJECT))
        from jobs.catalog import pattern_paths

        return [str(p) for p in pattern_paths(glob=os.environ.get("SES_PATTERNS"))]

    @task
    def ingest(paths: list[str], ds=None) -> str:
        """Raw files of the patterns' sources -> events/<source>; each batch passes the
        events suite before it is committed."""
        import sys

        sys.path.insert(0, str(PROJECT))
        from jobs.catalog import load_catalog

        sources = sorted({p.source for _, p in load_catalog(paths).patterns})
        _job("ingest", "--logical-date", ds, "--run-id", f"airflow_{ds}",
             *[arg for s in sources for arg in ("--source", s)])
        return ds

    @task_group
    def pattern_run(path: str):
        @task
        def match(path: str, ds=None) -> str:
            _job("match-job", path, "--run-id", f"airflow_{ds}", "--logical-date", ds)
            return path

        @task(retries=0)  # a failed suite fails again: no retry, no publish
        def validate(path: str, ds=None) -> str:
            _job("validate-run", path, "--run-id", f"airflow_{ds}")
            return path

        @task
        def publish(path: str, ds=None) -> str:
            _job("publish", path, "--run-id", f"airflow_{ds}")
            return path

        publish(validate(match(path)))

    @task(trigger_rule="all_done", retries=0)
    def summary(paths: list[str], ds=None) -> str:
        """The run log of this logical date, also when some step failed; the run fails
        unless every pattern was published (read by ``jobs runs`` in its own process)."""
        return _job("runs", "--run-id", f"airflow_{ds}", "--last", "1000",
                    "--expect", str(len(paths)), spark=False)

    @task(retries=0)
    def model(name: str) -> str:
        """Build one SQL model, test it, and only then replace its table."""
        _job("models", "--select", name)
        return name

    @task(retries=0)
    def models_invalid(message: str) -> None:
        raise RuntimeError(message)

    paths = list_patterns()
    runs = pattern_run.expand(path=paths)
    ingest(paths) >> runs >> summary(paths)
    models, problem = _models()
    if problem:
        runs >> models_invalid.override(trigger_rule="all_done")(problem)
    built = {}
    for name, deps in models:  # in dependency order; after every pattern group
        t = model.override(task_id=f"model_{name}",
                           trigger_rule="all_success" if deps else "all_done")(name)
        if deps:
            [built[d] for d in deps] >> t
        else:
            runs >> t
        built[name] = t


ses_nightly()
