"""The nightly SES pipeline: ingest -> one task per pattern (match, validate, publish) -> summary.

Thin on purpose: parsing this file reads ``conf/pipeline.yaml`` (schedule, retries) and
nothing else; the work runs in the project's jobs, started from the project's venv with
spark-submit as ``make run`` does (``spark_entry.py``). Patterns are listed when a run
starts (``patterns/*.yaml`` and ``*.yml``), so a new pattern file joins the next run without touching
this file. Each pattern's task is one Spark application that matches, validates and
publishes it, so a pattern's table is published as soon as it passes, and the task shows
the pattern's name. Every step is idempotent: publishing MERGEs by match_id over the
range the logical date closes (the run's own date when a trigger gives none).

After the pattern tasks, one task per SQL model of ``models/`` (in dependency order):
each builds, tests and publishes its table; a model's task waits for the models it reads.
Last, ``catalogue`` rebuilds the catalogue site (``python -m jobs docs``).

Environment: SES_PROFILE (profile in conf/pipeline.yaml), SES_PIPELINE_CONF (another
pipeline.yaml), SES_PATTERNS (a glob, relative to the project, instead of patterns/*.yaml and
*.yml), SES_MODELS (a folder, relative to the project, instead of models/).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import yaml
from airflow.sdk import dag, task

PROJECT = Path(__file__).resolve().parent.parent
VENV_BIN = PROJECT / ".venv" / "bin"


def _settings() -> dict:
    path = Path(os.environ.get("SES_PIPELINE_CONF", PROJECT / "conf" / "pipeline.yaml"))
    with open(path, encoding="utf-8") as f:
        return (yaml.safe_load(f) or {}).get("airflow") or {}


SETTINGS = _settings()


def _job(*args: str, spark: bool = True) -> str:
    """Run one step the way `make run` does (spark-submit from the venv, or plain Python for
    a step without Spark), its lines streamed into the task log as they come. A step that
    exits with 2 failed on its input (a pattern file, a quality gate, a bad raw file): the
    task fails without retries, with the step's own message; other failures may retry."""
    import subprocess
    import sys

    from airflow.exceptions import AirflowFailException

    sys.path.insert(0, str(PROJECT))
    from jobs.config import load_profile
    from jobs.spark import spark_environment

    env = spark_environment(load_profile(), dict(os.environ, PYSPARK_PYTHON=str(VENV_BIN / "python"),
                                                 PYSPARK_DRIVER_PYTHON=str(VENV_BIN / "python")))
    cmd = ([str(VENV_BIN / "spark-submit"), str(PROJECT / "spark_entry.py"), *args] if spark
           else [str(VENV_BIN / "python"), "-m", "jobs", *args])
    lines = []
    with subprocess.Popen(cmd, cwd=PROJECT, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
        for line in proc.stdout:
            line = line.rstrip("\n")
            if line.strip() and not line.startswith("Current mem limits"):
                print(line, flush=True)
                lines.append(line)
    if proc.returncode != 0:
        errors = [line for line in lines if line.startswith("error:")]
        message = errors[-1] if errors else f"{' '.join(args)} exited with {proc.returncode}"
        raise (AirflowFailException if proc.returncode == 2 else RuntimeError)(message)
    return "\n".join(lines)


def _run(context) -> tuple[str, str]:
    """(run id, logical date) of this DAG run, the same in every task and every retry: the
    id from the run's start time and its Airflow run id (the shape ``make run`` writes
    too), the date from the logical date, or from the run's own time when the trigger gave
    none (an API trigger without a date)."""
    import sys

    sys.path.insert(0, str(PROJECT))
    from jobs.pipeline import new_run_id

    dag_run = context["dag_run"]
    when = context.get("logical_date") or dag_run.run_after
    started = dag_run.start_date or dag_run.run_after
    return new_run_id(started, seed=dag_run.run_id), when.date().isoformat()


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
    def ingest(paths: list[str]) -> str:
        """Raw files of the patterns' sources -> events/<source>; each batch passes the
        events suite before it is committed."""
        import sys

        from airflow.sdk import get_current_context

        sys.path.insert(0, str(PROJECT))
        from jobs.catalog import load_catalog

        run_id, day = _run(get_current_context())
        sources = sorted({p.source for _, p in load_catalog(paths).patterns})
        _job("ingest", "--logical-date", day, "--run-id", run_id,
             *[arg for s in sources for arg in ("--source", s)])
        return run_id

    @task(map_index_template="{{ pattern_name }}")
    def run_pattern(path: str) -> str:
        """Match, validate and publish one pattern in one Spark application: its table is
        published as soon as its matches pass their suite (a failed suite publishes
        nothing and is not retried)."""
        from airflow.sdk import get_current_context

        context = get_current_context()
        context["pattern_name"] = Path(path).stem
        run_id, day = _run(context)
        _job("run-pattern", path, "--run-id", run_id, "--logical-date", day)
        return path

    @task(trigger_rule="all_done", retries=0)
    def summary(paths: list[str]) -> str:
        """The run log of this DAG run, also when some step failed; the run fails unless
        every pattern was published (read by ``jobs runs`` in its own process)."""
        from airflow.sdk import get_current_context

        run_id, _ = _run(get_current_context())
        return _job("runs", "--run-id", run_id, "--last", "1000",
                    "--expect", str(len(paths)), spark=False)

    @task(retries=0)
    def model(name: str) -> str:
        """Build one SQL model, test it, and only then replace its table."""
        _job("models", "--select", name)
        return name

    @task(retries=0)
    def models_invalid(message: str) -> None:
        raise RuntimeError(message)

    @task(trigger_rule="all_done", retries=0)
    def catalogue() -> str:
        """The catalogue site (patterns, matches, runs, quality), also after failures."""
        return _job("docs", spark=False)

    paths = list_patterns()
    runs = run_pattern.expand(path=paths)
    done = summary(paths)
    ingest(paths) >> runs >> done
    site = catalogue()
    done >> site
    models, problem = _models()
    if problem:
        runs >> models_invalid.override(trigger_rule="all_done")(problem) >> site
    built = {}
    for name, deps in models:  # in dependency order; after every pattern group
        t = model.override(task_id=f"model_{name}",
                           trigger_rule="all_success" if deps else "all_done")(name)
        if deps:
            [built[d] for d in deps] >> t
        else:
            runs >> t
        built[name] = t
        t >> site


ses_nightly()
