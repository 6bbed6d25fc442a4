"""``models``: build, test and publish the SQL models (docs/models.md) in dependency order,
each computed, tested and only then written to ``models/<name>``."""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from pathlib import Path

from deltalake import CommitProperties

from jobs.config import Profile
from jobs.failpoints import reached
from jobs.lake.locks import pattern_lock
from jobs.lake.views import inputs_of
from jobs.pipeline.context import RunContext
from jobs.pipeline.validate.gx import build_docs, run_suite
from jobs.pipeline.validate.quality import DRIVER_ROWS
from jobs.progress import say
from jobs.project.models import ModelError, expectations, load_models
from jobs.spark.sql import check_read_only
from jobs.spark.tables import read_spark
from jobs.spark.views import register_spark
from jobs.status import FAILED, SKIPPED, SUCCESS


class ModelFailed(RuntimeError):
    """A model's tests failed: its table keeps its previous version."""


INPUTS_KEY = "ses.model.inputs"  # in the commit that wrote a model: what it was built from


def model_inputs(lake, m) -> dict[str, str]:
    """What model ``m`` is built from: its SQL and tests, and the versions of the tables
    and reference files it reads (``views.inputs_of``)."""
    text = json.dumps([m.sql, list(m.tests)], sort_keys=True, default=str)
    return {"model": hashlib.sha256(text.encode()).hexdigest(), **inputs_of(lake, m.sql)}


def built_from(lake, name: str) -> dict | None:
    """The inputs recorded by the last build of model ``name`` (None: none recorded)."""
    dt = lake.read_table(lake.model(name))
    if dt is None:
        return None
    for commit in dt.history(20):  # newest first; a maintenance commit records none
        if INPUTS_KEY in commit:
            return json.loads(commit[INPUTS_KEY])
    return None


def run_models(spark, lake, select: list[str] | None = None, folder: Path | None = None,
               echo=say) -> list[dict]:
    """Build, test and publish the models in dependency order; one row per model
    (status success, failed or skipped: ``jobs.status``). Only the views the models name
    are registered; a model's table small enough for the driver (``DRIVER_ROWS``) is
    tested there (GX's pandas engine: the rows are collected to be written anyway), and
    the Data Docs of all models' tests are built once at the end."""

    models = load_models(folder, select)
    failed: set[str] = set()
    rows, results = [], []
    views: set[str] | None = None  # registered on Spark when a model is first built
    for m in models:
        t0 = time.perf_counter()
        blocked = [d for d in m.depends_on if d in failed]
        if blocked:
            failed.add(m.name)
            rows.append({"model": m.name, "status": SKIPPED,
                         "message": f"depends on failed model(s) {', '.join(blocked)}"})
            echo(f"SKIPPED model {m.name}: depends on failed {', '.join(blocked)}")
            continue
        try:
            inputs = model_inputs(lake, m)
            if built_from(lake, m.name) == inputs:  # nothing it reads changed: no Spark
                n = lake.count_rows(lake.model(m.name))
                rows.append({"model": m.name, "status": SUCCESS, "rows": n, "unchanged": True,
                             "seconds": round(time.perf_counter() - t0, 1)})
                echo(f"model {m.name}: {n} row(s), unchanged (its inputs did not change)")
                continue
            if views is None:
                views = set(register_spark(spark, lake, sql="\n".join(x.sql for x in models)))
            missing = [t for t in m.tables if t not in views]
            if missing:
                raise ModelFailed(f"reads {', '.join(missing)}, which the lake does not have "
                                  f"(yet): run the patterns or models that publish them")
            check_read_only(spark, m.sql, catalogue=False,
                            what=f"{m.path}: a model is one query")  # before spark.sql runs it
            df = spark.sql(m.sql)
            table = df.toArrow()
            outcome = None
            if m.tests:
                frame = table.to_pandas() if table.num_rows <= DRIVER_ROWS else df
                outcome = run_suite(lake, f"model_{m.name}", expectations(m), frame, {},
                                    docs=False)
                results.append(outcome.result_id)
                if not outcome.success:
                    raise ModelFailed(f"tests failed, previous version kept: "
                                      f"{outcome.describe()}")
            lake.write(lake.model(m.name), table, mode="overwrite", schema_mode="overwrite",
                       commit_properties=CommitProperties(
                           custom_metadata={INPUTS_KEY: json.dumps(inputs)}))
            reached("models:after-model")
            # the models after it read the new version
            read_spark(spark, lake, lake.model(m.name)).createOrReplaceTempView(f"models_{m.name}")
            views.add(f"models_{m.name}")
            rows.append({"model": m.name, "status": SUCCESS, "rows": table.num_rows,
                         "seconds": round(time.perf_counter() - t0, 1)})
            echo(f"model {m.name}: {table.num_rows} row(s)"
                 + (f", {outcome.evaluated} test(s) passed" if outcome else ""))
        except Exception as exc:  # noqa: BLE001 - one failing model does not stop the others
            failed.add(m.name)
            message = str(exc).strip().splitlines()[0][:500]
            rows.append({"model": m.name, "status": FAILED, "message": message})
            echo(f"FAILED model {m.name}: {message}")
    build_docs(lake, results)
    return rows


def models_step(spark, ctx: RunContext, echo=say, select: list[str] | None = None
                ) -> list[dict]:
    """The SQL models (``models/``), after publish, in dependency order."""
    if not any(ctx.project.models.glob("*.sql")):
        return []
    try:
        return run_models(spark, ctx.lake, select, echo=echo)
    except ModelError as exc:
        echo(f"FAILED models: {exc}")
        return [{"model": "*", "status": FAILED, "message": str(exc)}]


def models_task(spark, profile: Profile, select: list[str] | None = None) -> list[dict]:
    """``ses models`` (and the DAG's model tasks): the models under their locks, shared on
    the lake (the model tasks run side by side) and exclusive on each model."""
    try:
        names = sorted(m.name for m in load_models(select=select))
    except ModelError:
        names = ["*"]  # models_step reports the error as the models' failed row
    with contextlib.ExitStack() as locks:
        for name in names:
            locks.enter_context(pattern_lock(profile.lake, f"model-{name}", "models",
                                             profile.lock_dir))
        return models_step(spark, RunContext.start(profile, "models"), select=select)
