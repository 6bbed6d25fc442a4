"""The nightly SES pipeline: ingest -> one task per source (match, validate, publish its
patterns) -> summary -> models -> catalogue.

Thin on purpose: parsing this file reads ``conf/pipeline.yaml`` (schedule, retries) and
nothing else; the work runs in the project's jobs, started from the project's venv with
spark-submit as ``make run`` does (``spark_entry.py``). Patterns are listed when a run
starts (``patterns/*.yaml`` and ``*.yml``), so a new pattern file joins the next run
without touching this file.

Why one task per source, not per pattern: the patterns that read one source are matched
in one Spark pass over its events, validated in one Great Expectations run and published
one after another (``ses run-patterns``, the code ``make run`` runs after its ingest), so
that a night's cost follows the data, not the number of pattern files. A pattern stays a
visible unit where that costs nothing: its row in the ``runs`` table, its line in the
source task's log and in the ``summary`` task, its page in the catalogue. A pattern that
fails fails alone: the others of its source are published, and the source's task fails
with an ``error:`` line that names the failed patterns and why. A failure a retry cannot
mend (a pattern file, a failed suite, a match limit) is not retried; any other is, and
the retry matches only the patterns this run has not published. A pattern file that does
not load gets a task of its own, named after the file, that fails with the file's line.

The steps of one DAG run share one warm step server (``spark_session``, a setup task; see
``jobs/ops/session.py``), which ``stop_session`` ends; the first step that needs Spark
starts its Spark application and the later ones find it warm (a night with nothing new
starts none); a step that finds no server runs with its own spark-submit on the
profile's Spark master
(``jobs.spark.session.submit_command``). Every step is idempotent: publishing replaces,
by match_id, the matches of the range the logical date closes (the run's own date when a
trigger gives none).

After the source tasks, one task per SQL model of ``models/`` (in dependency order):
each builds, tests and publishes its table (or leaves it as it is when nothing it reads
changed); a model's task waits for the models it reads. Then ``maintain`` does the lake's
table maintenance when it is due (``maintenance.every`` in the profile, weekly by default:
compaction, log checkpoints, VACUUM). Last, ``catalogue`` rebuilds the catalogue site
(``ses docs``).

Environment: SES_PROFILE (profile in conf/pipeline.yaml), SES_PIPELINE_CONF (another
pipeline.yaml), SES_PATTERNS (a glob, relative to the project or absolute, instead of
patterns/*.yaml and *.yml), SES_MODELS (a folder, relative to the project, instead of
models/).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

from airflow.sdk import dag, task

from jobs import environment
from jobs.config import Project, load_airflow_settings
from jobs.ops.alerting import SesNotifier

PROJECT = Path(__file__).resolve().parent.parent
VENV_BIN = PROJECT / ".venv" / "bin"


SETTINGS = load_airflow_settings(Project(PROJECT))  # conf/pipeline.yaml's airflow: block


def _env(profile) -> dict:
    from jobs.spark.session import spark_environment

    return spark_environment(profile, dict(os.environ,
                                                  PYSPARK_PYTHON=str(VENV_BIN / "python"),
                                                  PYSPARK_DRIVER_PYTHON=str(VENV_BIN / "python")))


def _job(run_id: str, *args: str, spark: bool = True) -> str:
    """Run one step of the DAG run ``run_id`` the way `make run` does: in the run's warm
    Spark session (``jobs.ops.session``), or, when none answers, with its own spark-submit from
    the venv (plain Python for a step without Spark). Its lines stream into the task log.
    A step that exits with 2 failed on its input (a pattern file, a quality gate, a bad
    raw file): the task fails without retries, with the step's own message. One that exits
    with 75 failed for a reason a rerun mends (the lake busy, a commit conflict, the
    storage, a lost executor) and is retried with back-off, as is any other failure."""
    import subprocess

    from airflow.sdk.exceptions import AirflowFailException

    from jobs.ops.session import ask, socket_path
    from jobs.spark.session import WORKER_BANNERS

    banners = tuple(b.decode() for b in WORKER_BANNERS)
    lines = []

    def echo(line: str) -> None:
        if line.strip() and not line.startswith(banners):
            print(line, flush=True)
            lines.append(line)

    code = ask(socket_path(run_id), list(args), echo)
    if code is None:
        from jobs.config import load_profile
        from jobs.spark.session import submit_command

        profile = load_profile()
        cmd = (submit_command(profile, str(VENV_BIN / "spark-submit"),
                              str(PROJECT / "spark_entry.py"), list(args))
               if spark else [str(VENV_BIN / "python"), "-m", "jobs", *args])
        with subprocess.Popen(cmd, cwd=PROJECT, env=_env(profile), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, bufsize=1) as proc:
            for line in proc.stdout:
                echo(line.rstrip("\n"))
        code = proc.returncode
    if code != 0:
        errors = [line for line in lines if line.startswith("error:")]
        message = " ".join(errors) if errors else f"{' '.join(args)} exited with {code}"
        if code == 2:
            raise AirflowFailException(f"{message} (an input error: not retried)")
        raise RuntimeError(f"{message} ({'transient: ' if code == 75 else ''}exit {code}; "
                           "retried with back-off)")
    return "\n".join(lines)


def _run(context) -> tuple[str, str]:
    """(run id, logical date) of this DAG run, the same in every task and every retry: the
    id from the run's start time and its Airflow run id (the shape ``make run`` writes
    too), the date from the logical date, or from the run's own time when the trigger gave
    none (an API trigger without a date)."""
    from jobs.status import new_run_id

    dag_run = context["dag_run"]
    when = context.get("logical_date") or dag_run.run_after
    started = dag_run.start_date or dag_run.run_after
    return new_run_id(started, seed=dag_run.run_id), when.date().isoformat()


def _lineage_parent(context) -> list[str]:
    """The task's OpenLineage run (Airflow's OpenLineage provider), so that the patterns'
    lineage events name it as their parent; none when the provider is not there."""
    try:
        from airflow.providers.openlineage.plugins.macros import lineage_parent_id

        return ["--lineage-parent", lineage_parent_id(context["ti"])]
    except Exception:  # noqa: BLE001 - lineage is optional; the task runs without it
        return []


def _models() -> tuple[list[tuple[str, tuple[str, ...]]], str | None]:
    """(name, models it depends on) of every SQL model, in dependency order; reads only
    the files of models/ (or SES_MODELS). A broken model folder gives one failing task
    with the message, not a DAG that does not import."""
    from jobs.project.models import ModelError, load_models

    try:
        return [(m.name, m.depends_on) for m in load_models()], None
    except (ModelError, OSError) as exc:
        return [], str(exc)


@dag(
    dag_id="ses_nightly",
    schedule=SETTINGS.schedule,
    start_date=datetime.fromisoformat(SETTINGS.start_date).replace(tzinfo=timezone.utc),
    catchup=False,
    max_active_runs=1,
    # a task that fails for good sends an alert (the profile's webhooks, SES_ALERT_WEBHOOK,
    # email): Airflow's notifier mechanism, with the project's channels
    default_args={"on_failure_callback": [SesNotifier()],
                  "retries": SETTINGS.retries,
                  "retry_exponential_backoff": True,
                  "retry_delay": timedelta(minutes=SETTINGS.retry_delay_minutes)},
    tags=["ses", "lakehouse"],
    doc_md=__doc__,
)
def ses_nightly():
    @task
    def list_groups() -> list[dict]:
        """The pattern files (``*.yaml`` and ``*.yml``) by the source they read; a file that
        does not load, or whose name another file uses, is a group of its own that fails."""
        from jobs.project.patterns import pattern_paths, source_groups

        return source_groups(pattern_paths(glob=environment.get("SES_PATTERNS")))

    @task
    def spark_session() -> bool:
        """One warm Spark application for this DAG run's steps (``jobs.ops.session``); the
        steps run on their own when it does not come up."""
        from airflow.sdk import get_current_context

        from jobs.config import load_profile
        from jobs.ops.session import socket_path, start

        run_id, _ = _run(get_current_context())
        log = Path(environment.get("AIRFLOW_HOME") or PROJECT) / "ses-session.log"
        up = start(socket_path(run_id), _env(load_profile()), PROJECT, str(VENV_BIN / "python"), log)
        print(f"Spark session for run {run_id}: {'up' if up else 'not up, steps run alone'}"
              f" (log: {log})")
        return up

    @task(retries=0)
    def stop_session() -> None:
        from airflow.sdk import get_current_context

        from jobs.ops.session import ask, socket_path

        run_id, _ = _run(get_current_context())
        ask(socket_path(run_id), ["stop"], print)

    @task
    def ingest(groups: list[dict]) -> str:
        """Raw files of the patterns' sources -> events/<source>; each batch passes the
        events suite before it is committed."""
        from airflow.sdk import get_current_context

        run_id, day = _run(get_current_context())
        sources = sorted(g["source"] for g in groups if g["source"])
        _job(run_id, "ingest", "--logical-date", day, "--run-id", run_id,
             *[arg for s in sources for arg in ("--source", s)])
        return run_id

    @task(map_index_template="{{ group_name }}")
    def run_source(group: dict) -> list[str]:
        """Match, validate and publish the patterns of one source together (one pass over
        its events, one validation): each pattern's table is published when its matches
        pass their suite; a pattern that fails leaves the others published, and fails the
        task with its name and reason (see the module's docstring on retries)."""
        from airflow.sdk import get_current_context

        context = get_current_context()
        context["group_name"] = group["name"]
        run_id, day = _run(context)
        accept = (context["dag_run"].conf or {}).get("accept_changes") or []
        _job(run_id, "run-patterns", *group["paths"], "--run-id", run_id, "--logical-date", day,
             *[a for name in accept for a in ("--accept-changes", str(name))],
             *_lineage_parent(context))
        return group["paths"]

    @task(trigger_rule="all_done", retries=0)
    def summary(groups: list[dict]) -> str:
        """The run log of this DAG run, one line per pattern, also when some step failed;
        the run fails unless every pattern was published (read by ``jobs runs`` in its own
        process)."""
        from airflow.sdk import get_current_context

        run_id, _ = _run(get_current_context())
        return _job(run_id, "runs", "--run-id", run_id, "--last", "1000",
                    "--expect", str(sum(len(g["paths"]) for g in groups)), spark=False)

    @task(retries=0)
    def model(name: str) -> str:
        """Build one SQL model, test it, and only then replace its table."""
        from airflow.sdk import get_current_context

        _job(_run(get_current_context())[0], "models", "--select", name)
        return name

    @task(retries=0)
    def models_invalid(message: str) -> None:
        raise RuntimeError(message)

    @task(trigger_rule="all_done")
    def maintain() -> str:
        """The lake's table maintenance when due (``ses maintain --if-due``)."""
        from airflow.sdk import get_current_context

        run_id, day = _run(get_current_context())
        return _job(run_id, "maintain", "--if-due", "--logical-date", day, spark=False)

    @task(retries=0)
    def catalogue() -> str:
        """The catalogue site (patterns, matches, runs, quality), also after failures."""
        from airflow.sdk import get_current_context

        return _job(_run(get_current_context())[0], "docs", spark=False)

    groups = list_groups()
    runs = run_source.expand(group=groups)
    done = summary(groups)
    session = spark_session()
    session >> ingest(groups) >> runs >> done
    # teardowns: they run also after failures, and do not decide the run's state (the
    # summary and the models do)
    site = catalogue().as_teardown(setups=session)
    # maintenance after the source tasks and the models, before the catalogue: not after
    # the summary, which stays a leaf and so decides the run's state
    upkeep = maintain()
    done >> site >> stop_session().as_teardown(setups=session)
    runs >> upkeep >> site
    models, problem = _models()
    if problem:
        runs >> models_invalid.override(trigger_rule="all_done")(problem) >> site
    built = {}
    for name, deps in models:  # in dependency order; after every source task
        t = model.override(task_id=f"model_{name}",
                           trigger_rule="all_success" if deps else "all_done")(name)
        if deps:
            [built[d] for d in deps] >> t
        else:
            runs >> t
        built[name] = t
        t >> upkeep


ses_nightly()
