"""The kernels compiled ahead of time (``jobs.core.engine.aot``) against Numba's just-in-time ones:
the same matches on every committed pattern over the committed data, every call of a real
run served by a compiled signature, and the fallbacks (a call of another type, a module
built from other source)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from jobs.config import load_sources
from jobs.core.engine import aot
from jobs.core.engine.columns import from_arrow
from jobs.core.engine.options import MatchOptions
from jobs.core.engine.runtime import compile_pattern, execute
from jobs.core.language.patternfile import load_pattern
from jobs.core.local.row_patterns import is_sidecar
from jobs.pipeline.ingest import landing_files, typed_file

from ..conftest import ROOT


@pytest.fixture(scope="module")
def both():
    """(ahead of time, just in time): the two kernel sets of this process."""
    compiled = aot.load()
    assert compiled.loaded.mode == "aot", (
        f"the ahead-of-time kernels are not used: {compiled.loaded.reason}")
    return compiled, aot.load("jit")


def _events(source: str):
    src = load_sources()[source]
    return pa.concat_tables([typed_file(src, f)[0]
                             for f in landing_files(src, str(ROOT / "data" / "landing"))])


def _matches(compiled, cols, options) -> list:
    out = []
    for b in execute(compiled, cols, options):
        for k in range(len(b)):
            a, z = b.offsets[k], b.offsets[k + 1]
            out.append((b.alternative, tuple(b.rows[a:z]), tuple(b.variables[a:z])))
    return sorted(out)


def test_every_committed_pattern_matches_the_same_with_both_kernel_sets(both, monkeypatch):
    compiled_kernels, jit_kernels = both
    tables: dict[str, pa.Table] = {}
    patterns = [load_pattern(p) for p in sorted((ROOT / "patterns").glob("*.yaml"))
                if not is_sidecar(p)]
    checked = 0
    for pattern in patterns:
        if pattern.kind == "window" or pattern.source not in load_sources():
            continue
        if pattern.source not in tables:
            tables[pattern.source] = _events(pattern.source)
        c = compile_pattern(pattern)
        cols = from_arrow(tables[pattern.source], c.attributes)
        for options in (MatchOptions(matcher="ses"), MatchOptions(matcher="zstream"),
                        MatchOptions(matcher="ses", strategy="eager")):
            monkeypatch.setattr(aot, "_LOADED", compiled_kernels)
            before = compiled_kernels.loaded.fallback_calls
            ahead = _matches(c, cols, options)
            # a real run's calls all have a compiled signature
            assert compiled_kernels.loaded.fallback_calls == before, (pattern.name, options)
            monkeypatch.setattr(aot, "_LOADED", jit_kernels)
            assert _matches(c, cols, options) == ahead, (pattern.name, options)
            checked += 1
    assert checked >= 3 * 10


def test_a_call_of_another_type_falls_back_to_the_same_kernel(both):
    compiled_kernels, jit_kernels = both
    ts = np.arange(6, dtype=np.int64) * 10
    masks = np.array([1, 2, 1, 2, 1, 2], np.int64)
    seg_start, seg_end = np.array([0], np.int64), np.array([6], np.int64)
    args = (ts, masks, seg_start, seg_end, 25, 2, 1, np.zeros(2, np.int64),
            np.array([2, 0], np.int64), True, False, np.ones(2, np.int64), 2)
    expected = jit_kernels.scan_windows(*args)
    before = compiled_kernels.loaded.fallback_calls
    got = compiled_kernels.scan_windows(*args)
    assert compiled_kernels.loaded.fallback_calls == before  # the compiled export
    readonly = ts.copy()
    readonly.flags.writeable = False  # Numba types a read-only array apart
    got_ro = compiled_kernels.scan_windows(readonly, *args[1:])
    assert compiled_kernels.loaded.fallback_calls == before + 1
    for e, g, r in zip(expected, got, got_ro):
        np.testing.assert_array_equal(e, g)
        np.testing.assert_array_equal(e, r)


def test_argument_types_are_the_ones_numba_gives():
    from numba import typeof

    from jobs.core.local.aot_build import numba_key

    arrays = [np.zeros(3, np.int64), np.zeros((2, 3), np.float64, order="F"),
              np.zeros((2, 3), np.int8), np.zeros((4, 4))[::2, ::2], np.zeros(0, np.int64)]
    ro = np.zeros(2, np.int64)
    ro.flags.writeable = False
    for x in [*arrays, ro, True, np.bool_(False), 3, 2.5, np.int64(4), np.int8(1),
              (np.zeros(2, np.int64), 3, (True, np.zeros(1)))]:
        assert aot.arg_key(x) == numba_key(typeof(x)), x


def test_a_module_built_from_other_source_is_not_used(tmp_path, monkeypatch):
    manifest = json.loads(aot.MANIFEST.read_text())
    stale = tmp_path / aot.MANIFEST.name
    stale.write_text(json.dumps(manifest | {"digest": "0" * 64}))
    monkeypatch.setattr(aot, "MANIFEST", stale)
    assert "changed since the build" in aot._built()[2]
    monkeypatch.setattr(aot, "MANIFEST", tmp_path / "missing.json")
    assert "not built" in aot._built()[2]
    monkeypatch.setenv("SES_KERNELS", "jit")
    monkeypatch.setattr(aot, "_LOADED", None)
    assert aot.load().loaded.mode == "jit"


def test_the_committed_signatures_are_those_the_examples_call():
    """``aot_signatures.json`` (compiled by a second process while the build runs the
    examples) lists what the examples call the kernels with: a stale file only costs the
    build its second core, but say so; and each type key reads back as its Numba type."""
    import subprocess
    import sys

    from jobs.core.local import aot_build

    # in a process of its own: this one's kernels were called with other types above
    found = json.loads(subprocess.run(
        [sys.executable, "-c", "import json; from jobs.core.local import aot_build as b; "
         "b.exercise(); print(json.dumps(b.exercised()))"],  # from Numba's cache
        capture_output=True, text=True, check=True).stdout)
    assert aot_build.listed() == found, (
        f"{aot_build.SIGNATURES.name} is stale: run python -m jobs.core.local.aot_build "
        "and commit the file it rewrites")
    for entries in found.values():
        for args, ret in entries:
            for key in (*args, ret):
                assert aot_build.numba_key(aot_build.numba_type(key)) == aot.frozen(key)
