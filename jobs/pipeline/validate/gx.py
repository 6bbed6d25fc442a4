"""Great Expectations as the pipeline runs it: one file context per lake (in the lake's
folder on this machine), one in-memory asset per engine (pandas on the driver, Spark, Spark
over stored files), a suite validated over a frame given at run time (``run_suite``), its
result kept in the context's store, and the Data Docs built once for a batch of results.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import threading
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache

from jobs.lake import store as lk
from jobs.status import new_run_id


@dataclass
class Outcome:
    suite: str
    success: bool
    failed: list[str]
    docs: str | None
    evaluated: int
    result_id: object = None  # GX's identifier of the stored result (for build_docs)

    def describe(self) -> str:
        if self.success:
            return f"{self.suite}: {self.evaluated} expectations met"
        where = f"; details: {self.docs}" if self.docs else ""
        return f"{self.suite}: failed {len(self.failed)} of {self.evaluated}: " + \
            "; ".join(self.failed) + where


# -- running a suite -------------------------------------------------------------------------
_CONTEXTS: dict[str, object] = {}
# the validation results the Data Docs index lists, latest first: its build reads each
# one it lists, and the lake keeps every night's (each keeps its own page; the
# catalogue's quality page lists them all)
DOCS_INDEX_RESULTS = 100


def context(lake: lk.Lake):
    """The lake's GX file context, in the lake's folder on this machine
    (``Lake.local_home``); its Data Docs are HTML files there."""
    root = str(lake.local_home())
    with _CONTEXT_LOCK:
        return _context(root)


_CONTEXT_LOCK = threading.RLock()  # the warm-up thread and the suites


# modules GX imports for expectations this project never runs (the KL divergence and the
# KS tests import scipy.stats: about 1 s of GX's 3 s import), loaded on first use instead
DEFERRED = ("scipy.stats",)


def defer_imports(names: tuple[str, ...] = DEFERRED) -> None:
    """Each module of ``names`` not yet imported becomes a lazy module (``importlib``'s
    ``LazyLoader``): importing it costs nothing, and its code runs on the first use of one
    of its attributes."""
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            continue
        spec.loader = importlib.util.LazyLoader(spec.loader)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


def _context(root: str):
    if root not in _CONTEXTS:
        defer_imports()
        import great_expectations as gx
        from great_expectations.data_context.types.base import ProgressBarsConfig

        os.makedirs(root, exist_ok=True)
        _compile_templates_once()
        _type_names_once()
        ctx = gx.get_context(mode="file", project_root_dir=root)
        ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
        _CONTEXTS[root] = ctx
    return _CONTEXTS[root]


def _type_names_once() -> None:
    """GX names an expectation's type from its class name (``camel_to_snake``: two
    regular expressions) every time it reads the expectation's configuration, a thousand
    times a validation (about 1 s of every 60 validations): the pure function is
    memoised where expectations call it."""
    from great_expectations.expectations import expectation

    name = getattr(expectation, "camel_to_snake", None)
    if callable(name) and not hasattr(name, "cache_info"):
        expectation.camel_to_snake = lru_cache(maxsize=1024)(name)


def _compile_templates_once() -> None:
    """The Data Docs' Jinja templates compiled once per process: GX makes a new Jinja
    environment for every page it renders, and each compiled its templates again (about
    0.2 s of every night's Data Docs). Every environment of GX's page views is given one
    shared bytecode cache (Jinja's ``bytecode_cache``: compiled templates by name and
    source checksum), so a changed template is compiled again."""
    from great_expectations.render.view.view import DefaultJinjaView
    from jinja2 import BytecodeCache

    if getattr(DefaultJinjaView, "_ses_cache", None) is not None:
        return

    class InMemory(BytecodeCache):
        def __init__(self):
            self.code: dict[str, bytes] = {}

        def load_bytecode(self, bucket) -> None:
            if bucket.key in self.code:
                bucket.bytecode_from_string(self.code[bucket.key])

        def dump_bytecode(self, bucket) -> None:
            self.code[bucket.key] = bucket.bytecode_to_string()

    cache, init = InMemory(), DefaultJinjaView.__init__

    def cached_init(self, *args, **kwargs) -> None:
        init(self, *args, **kwargs)
        if hasattr(self, "env"):  # a GX whose views keep another shape: compiled as before
            self.env.bytecode_cache = cache

    DefaultJinjaView.__init__ = cached_init
    DefaultJinjaView._ses_cache = cache


_BATCHES: dict[tuple[str, str], object] = {}  # (GX project, engine) -> batch definition


def _batch_definition(lake: lk.Lake, engine: str):
    """The whole-frame batch definition of the engine's one in-memory asset (``frames``),
    made once per GX project: every suite validates a frame given at run time. Engines:
    ``driver`` (pandas), ``spark`` (GX caches the frame: a check frame's joins are computed
    once for all the suite's jobs) and ``scan`` (Spark over stored files, not cached: each
    job reads only the columns it checks, cheaper than filling Spark's cache)."""
    key = (str(lake.local_home()), engine)
    with _CONTEXT_LOCK:
        return _batch_definition_of(lake, key, engine)


def _batch_definition_of(lake: lk.Lake, key: tuple[str, str], engine: str):
    if key not in _BATCHES:
        ctx = context(lake)
        ds = (ctx.data_sources.add_or_update_spark(name="lake") if engine == "spark"
              else ctx.data_sources.add_or_update_spark(name="lake_scan", persist=False)
              if engine == "scan" else ctx.data_sources.add_or_update_pandas(name="lake_driver"))
        try:
            asset = ds.get_asset("frames")
        except LookupError:
            asset = ds.add_dataframe_asset(name="frames")
        try:
            _BATCHES[key] = asset.get_batch_definition("all")
        except KeyError:
            _BATCHES[key] = asset.add_batch_definition_whole_dataframe("all")
    return _BATCHES[key]


# (GX project, suite name) -> (its expectations as JSON, the stored suite): a suite is
# stored again only when its expectations change (GX's store writes and reads it back:
# about 40 ms of each validation)
_SUITES: dict[tuple[str, str], tuple[str, object]] = {}


def _suite_file(root: str, name: str) -> str:
    """Where GX's file context keeps a suite (a suite whose file is gone, or kept
    elsewhere by another GX, is stored again)."""
    return os.path.join(root, "gx", "expectations", f"{name}.json")


def validated(lake: lk.Lake, name: str, expectations: list[dict], df, parameters: dict,
               scan: bool = False, result_format: str = "BASIC"):
    """GX's validator run over ``df`` (a Spark or a pandas frame; ``scan``: a Spark frame
    that only reads files, ``_batch_definition``) with the suite ``name``: (the result, the
    validator). Nothing is stored."""
    from great_expectations.core.expectation_suite import ExpectationSuite
    from great_expectations.expectations.expectation_configuration import (
        ExpectationConfiguration,
    )
    from great_expectations.validator.v1_validator import Validator

    ctx = context(lake)
    engine = ("scan" if scan else "spark") if hasattr(df, "sparkSession") else "driver"
    root = str(lake.local_home())
    spec = json.dumps(expectations, sort_keys=True, default=str)
    with _CONTEXT_LOCK:
        held = _SUITES.get((root, name))
        if held is None or held[0] != spec or not os.path.exists(_suite_file(root, name)):
            suite = ctx.suites.add_or_update(ExpectationSuite(name=name, expectations=[
                ExpectationConfiguration(type=e["type"], kwargs=e["kwargs"])
                for e in expectations]))
            held = _SUITES[(root, name)] = (spec, suite)
    suite = held[1]
    validator = Validator(batch_definition=_batch_definition(lake, engine),
                          batch_parameters={"dataframe": df}, result_format=result_format)
    return validator.validate_expectation_suite(suite, parameters), validator


def run_suite(lake: lk.Lake, name: str, expectations: list[dict], df,
              parameters: dict, run_name: str | None = None, docs: bool = True,
              scan: bool = False, exact=None) -> Outcome:
    """Validate ``df`` (a Spark or a pandas frame: GX's Spark or pandas engine) with the
    suite ``name``; the result is kept in the GX project's validation results store (and
    shown in the catalogue and the Data Docs) under ``run_name``: the pipeline's run id,
    or a new id of the same shape. The suite is validated by GX's validator on the
    engine's one asset, without a validation definition or a checkpoint per suite (their
    store writes cost more than the checks of a small frame). ``docs=False`` leaves the
    Data Docs to one ``build_docs`` over a batch of results (``Outcome.result_id``);
    ``scan``: ``df`` only reads stored files (``_batch_definition``), and the suite is
    first run for its verdict alone (GX's ``BOOLEAN_ONLY``: on Spark, each expectation's
    sample of unexpected rows is one more scan of every file, about half the suite's time
    on a batch of millions of rows), then, only when it fails, again for the counts and
    samples that say why. ``exact``: the frame ``df`` stands for, when a failure on ``df``
    may be ``df``'s own (``quality.keyed_ids``): the second run is on ``exact``, and its
    result is the suite's."""
    from great_expectations.core.run_identifier import RunIdentifier
    from great_expectations.data_context.types.resource_identifiers import (
        ExpectationSuiteIdentifier,
        ValidationResultIdentifier,
    )

    ctx = context(lake)
    result, validator = validated(lake, name, expectations, df, parameters, scan,
                                  "BOOLEAN_ONLY" if scan else "BASIC")
    if (scan or exact is not None) and not result.success:
        result, validator = validated(lake, name, expectations,
                                      df if exact is None else exact, parameters, scan)
    run_id = RunIdentifier(run_name=run_name or new_run_id(),
                           run_time=datetime.now(timezone.utc))
    result.meta.update(run_id=run_id, validation_time=run_id.run_time,
                       batch_parameters={"dataframe": "<in-memory frame>"})
    result_id = ValidationResultIdentifier(
        expectation_suite_identifier=ExpectationSuiteIdentifier(name=name), run_id=run_id,
        batch_identifier=validator.active_batch_id)
    ctx.validation_results_store.set(result_id, result)
    if docs:
        build_docs(lake, [result_id])
    failed = []
    for r in result.results:
        if not r.success:
            cfg = r.expectation_config
            column = cfg.kwargs.get("column") or f"{cfg.kwargs.get('column_A')}/{cfg.kwargs.get('column_B')}"
            count = (r.result or {}).get("unexpected_count")
            failed.append(f"{cfg.type}({column})" + (f": {count} row(s)" if count else ""))
    return Outcome(name, bool(result.success), failed, docs_url(lake), len(result.results),
                   result_id)


_DOCS_URLS: dict[str, str | None] = {}


def docs_url(lake: lk.Lake) -> str | None:
    """Where the lake's Data Docs open (asked of GX once per lake and process)."""
    root = str(lake.local_home())
    if root not in _DOCS_URLS:
        urls = context(lake).get_docs_sites_urls()
        _DOCS_URLS[root] = urls[0]["site_url"] if urls else None
    return _DOCS_URLS[root]


# the results whose Data Docs wait for the end of a night (``one_docs_build``), per lake
_DEFERRED: ContextVar[dict | None] = ContextVar("deferred_docs", default=None)


def build_docs(lake: lk.Lake, result_ids: list) -> None:
    """The Data Docs pages of a batch of results (and the index), in one build. The index
    lists the latest ``DOCS_INDEX_RESULTS`` results (at least the batch): GX reads each
    result it lists, and the validations store grows every night. Inside
    ``one_docs_build`` the batch waits for that build."""
    held = _DEFERRED.get()
    if held is not None and lake.root in held:
        held[lake.root].extend(result_ids)
        return
    if result_ids:
        ctx = context(lake)
        sites = ctx.variables.data_docs_sites or {}  # a copy: set back (not saved)
        for site in sites.values():
            index = site.setdefault("site_index_builder",
                                    {"class_name": "DefaultSiteIndexBuilder"})
            # GX builds pages for the latest results within the limit only: the batch's
            index["validation_results_limit"] = max(DOCS_INDEX_RESULTS, len(result_ids))
        ctx.variables.data_docs_sites = sites
        ctx.build_data_docs(resource_identifiers=result_ids)


@contextmanager
def one_docs_build(lake: lk.Lake):
    """The Data Docs of every result validated inside (a night's events, matches and
    models suites) built once on leaving, also when the night fails: each build lists
    the whole results store and renders the index again (about 1.2 s)."""
    ids: list = []
    token = _DEFERRED.set({**(_DEFERRED.get() or {}), lake.root: ids})
    try:
        yield
    except BaseException:
        _DEFERRED.reset(token)
        try:  # the pages of what was validated before the failure; the failure is the news
            build_docs(lake, ids)
        except Exception:  # noqa: BLE001, S110 - not to hide the night's own error
            pass
        raise
    _DEFERRED.reset(token)
    build_docs(lake, ids)
