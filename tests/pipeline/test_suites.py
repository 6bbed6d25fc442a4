"""The expectations the matches suite derives from a pattern file (no Spark here: the
suites run on real frames in tests/pipeline/test_pipeline.py)."""

from jobs.core.language.patternfile import load_pattern, parse_pattern
from jobs.pipeline.validate.quality import matches_expectations

from ..conftest import ROOT


def _between(suite: list[dict]) -> list[dict]:
    return [e["kwargs"] for e in suite if e["type"] == "expect_column_values_to_be_between"]


def test_a_count_measure_lies_within_its_variables_bounds():
    pattern = load_pattern(ROOT / "patterns" / "sepsis_crp_run_high_average.yaml")
    assert {"column": "m_tests", "min_value": 2} in _between(matches_expectations(pattern))
    text = ("name: x\nsource: s\nwithin: 1d\nalternatives:\n"
            "  - sets: [[a, 'p{2,4}']]\n    measures: {doses: count(p), total: sum(p.v)}\n"
            "  - sets: [[a, q+]]\n    measures: {doses: count(q)}\n")
    kwargs = _between(matches_expectations(parse_pattern(text)))
    assert {"column": "a1_m_doses", "min_value": 2, "max_value": 4} in kwargs
    assert {"column": "a2_m_doses", "min_value": 1} in kwargs
    assert not any("total" in k["column"] for k in kwargs)  # a sum has no bounds


def test_the_docs_index_reads_only_the_latest_results(tmp_path, monkeypatch):
    """The Data Docs index lists the latest ``DOCS_INDEX_RESULTS`` validation results, so
    its build reads those, not every result the lake kept (one per pattern and night);
    every result keeps its own page."""
    import pandas as pd
    from great_expectations.data_context.data_context.abstract_data_context import (
        AbstractDataContext,
    )

    from jobs.lake.store import Lake
    from jobs.pipeline.validate import gx

    monkeypatch.setattr(gx, "DOCS_INDEX_RESULTS", 2)
    lake = Lake(str(tmp_path / "lake"))
    gx._CONTEXTS.pop(str(lake.local_home()), None)
    frame = pd.DataFrame({"x": [1, 2, 3]})
    expectations = [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "x"}}]
    ids = [gx.run_suite(lake, f"suite_{k}", expectations, frame, {}, docs=False).result_id
           for k in range(3)]
    gx.build_docs(lake, ids)  # a night larger than the limit: every page
    ids += [gx.run_suite(lake, f"suite_{k}", expectations, frame, {}, docs=False).result_id
            for k in range(3, 5)]  # the next night
    read = []
    original = AbstractDataContext.get_validation_result
    monkeypatch.setattr(AbstractDataContext, "get_validation_result",
                        lambda self, *a, **kw: read.append(kw.get("run_id")) or
                        original(self, *a, **kw))
    gx.build_docs(lake, ids[3:])
    gx._CONTEXTS.pop(str(lake.local_home()), None)
    index = lake.local_home() / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    html = index.read_text()
    listed = [k for k in range(5) if f"validations/suite_{k}/" in html]
    assert listed == [3, 4], listed  # the two latest
    assert len(read) <= 2 + len(ids)  # the index's two, and each new result's page
    pages = list((index.parent / "validations").glob("suite_*"))
    assert len(pages) == 5


def test_a_nights_data_docs_are_built_once_also_when_the_night_fails(tmp_path, monkeypatch):
    """Inside ``one_docs_build`` every step's ``build_docs`` waits: one build on leaving
    renders every result's page (each build lists the whole results store); a night that
    fails still gets the pages of what it validated, and its own error."""
    import pandas as pd
    import pytest
    from great_expectations.data_context.data_context.abstract_data_context import (
        AbstractDataContext,
    )

    from jobs.lake.store import Lake
    from jobs.pipeline.validate import gx

    lake = Lake(str(tmp_path / "lake"))
    gx._CONTEXTS.pop(str(lake.local_home()), None)
    frame = pd.DataFrame({"x": [1, 2, 3]})
    expectations = [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "x"}}]
    builds = []
    original = AbstractDataContext.build_data_docs
    monkeypatch.setattr(AbstractDataContext, "build_data_docs",
                        lambda self, *a, **kw: builds.append(kw.get("resource_identifiers"))
                        or original(self, *a, **kw))
    pages = lake.local_home() / "gx" / "uncommitted" / "data_docs" / "local_site" / "validations"
    with gx.one_docs_build(lake):
        gx.run_suite(lake, "suite_a", expectations, frame, {})  # a step's own build
        ids = [gx.run_suite(lake, f"suite_{k}", expectations, frame, {},
                                 docs=False).result_id for k in "bc"]
        gx.build_docs(lake, ids)
        assert builds == [] and not pages.exists()
    assert len(builds) == 1 and len(builds[0]) == 3
    assert sorted(p.name for p in pages.iterdir()) == ["suite_a", "suite_b", "suite_c"]
    with pytest.raises(RuntimeError, match="the night failed"):
        with gx.one_docs_build(lake):
            gx.run_suite(lake, "suite_d", expectations, frame, {})
            raise RuntimeError("the night failed")
    assert len(builds) == 2 and (pages / "suite_d").is_dir()
    gx.run_suite(lake, "suite_e", expectations, frame, {})  # outside: built at once
    assert len(builds) == 3
    gx._CONTEXTS.pop(str(lake.local_home()), None)


def test_data_docs_pages_from_compiled_templates_equal_the_first_build(tmp_path):
    """GX's page templates are compiled once per process (``gx._compile_templates_once``):
    a second build renders every page from the compiled templates, byte for byte as the
    build that compiled them did (but for the time GX stamps on a picture's address)."""
    import re
    import shutil

    import pandas as pd
    from great_expectations.render.view.view import DefaultJinjaView

    from jobs.lake.store import Lake
    from jobs.pipeline.validate import gx

    lake = Lake(str(tmp_path / "lake"))
    frame = pd.DataFrame({"x": [1, 2, None]})
    expectations = [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "x"}}]
    result = gx.run_suite(lake, "s", expectations, frame, {}, docs=False).result_id
    site = lake.local_home() / "gx" / "uncommitted" / "data_docs" / "local_site"
    cache = DefaultJinjaView._ses_cache
    cache.code.clear()  # the first build compiles every template it uses

    def build() -> dict[str, str]:
        shutil.rmtree(site, ignore_errors=True)
        gx.build_docs(lake, [result])
        return {str(p.relative_to(site)): re.sub(r"\?d=\d{8}T\d{6}\.\d+Z", "?d=", p.read_text())
                for p in site.rglob("*.html")}

    first = build()
    compiled = dict(cache.code)
    assert len(compiled) > 5 and len(first) == 2
    assert build() == first
    assert cache.code == compiled  # nothing compiled again


def test_a_deferred_module_runs_on_its_first_use(monkeypatch):
    """``gx.defer_imports``: a module GX imports but the suites never use is registered
    without running its code; its first attribute runs it, and it then works as usual."""
    import importlib.util
    import sys

    from jobs.pipeline.validate.gx import DEFERRED, defer_imports

    name = "email.mime.audio"  # a module nothing here imports
    for n in (name, "email.mime"):
        monkeypatch.delitem(sys.modules, n, raising=False)
    defer_imports((name,))
    module = sys.modules[name]

    def ran() -> bool:  # its own namespace, read without running it
        return "MIMEAudio" in object.__getattribute__(module, "__dict__")

    assert not ran()  # registered, not run
    from email.mime.audio import MIMEAudio  # the first use runs it

    assert ran() and MIMEAudio.__name__ == "MIMEAudio"
    assert all(importlib.util.find_spec(n) for n in DEFERRED)  # GX's deferred modules exist


def test_a_suite_is_stored_again_only_when_it_changes(tmp_path, monkeypatch):
    """Validating the same suite again does not write it to GX's store again; changed
    expectations, or a suite file that is gone, are stored, and validated as they are."""
    import pandas as pd
    from great_expectations.core.factory.suite_factory import SuiteFactory

    from jobs.lake.store import Lake
    from jobs.pipeline.validate import gx

    lake = Lake(str(tmp_path / "lake"))
    stored = []
    original = SuiteFactory.add_or_update
    monkeypatch.setattr(SuiteFactory, "add_or_update",
                        lambda self, suite: stored.append(suite.name) or original(self, suite))
    frame = pd.DataFrame({"x": [1, 2, None]})
    not_null = [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "x"}}]
    exists = [{"type": "expect_column_to_exist", "kwargs": {"column": "x"}}]
    runs = [gx.run_suite(lake, "memo", e, frame, {}, docs=False)
            for e in (exists, exists, not_null, not_null)]
    assert [r.success for r in runs] == [True, True, False, False]
    assert stored == ["memo", "memo"]  # the first run and the change
    file = lake.local_home() / "gx" / "expectations" / "memo.json"
    assert file.is_file()
    file.unlink()
    assert not gx.run_suite(lake, "memo", not_null, frame, {}, docs=False).success
    assert stored == ["memo"] * 3 and file.is_file()
