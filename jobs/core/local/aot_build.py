"""Building the ahead-of-time kernels (``aot``): run what gives the kernels their argument
types, then compile each entry point for those signatures with ``numba.pycc``.

The signatures are also committed (``SIGNATURES``, ``aot_signatures.json``): a second
process compiles those while this one runs the examples (which fills Numba's cache for the
just-in-time kernels too), on the other core; a minute on a fresh clone becomes the longer
of the two. When the examples call the kernels with other signatures (the kernels or the
patterns changed), the build compiles those instead, after the other process, and rewrites
the file (commit it; ``tests/core/test_aot.py`` says so when it is stale).

    python -m jobs.core.local.aot_build      # make runs it once per checkout and when kernels change
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numba
import numpy as np
from numba.core import types
from numba.core.errors import NumbaPendingDeprecationWarning

from jobs.core.engine import aot, kernels
from jobs.core.engine.aot import ENTRY_POINTS, HERE, MANIFEST, MODULE, PATTERNS, source_digest
from jobs.core.language.patternfile import load_pattern
from jobs.core.local.examples import example_events
from jobs.core.local.row_patterns import is_sidecar
from jobs.core.local.runner import MatchOptions, run, warm_up

SIGNATURES = HERE / "aot_signatures.json"
COMPILE_LISTED = "--compile-listed"  # the second process's argument: compile SIGNATURES


def numba_key(t):
    """``aot.arg_key`` of a Numba type: what a call's argument must give to reach the
    export compiled for ``t`` (written to the manifest as JSON lists)."""
    if isinstance(t, types.Array):
        return ("array", np.dtype(str(t.dtype)).str, t.ndim, t.layout, not t.mutable,
                bool(t.aligned))
    if isinstance(t, types.Boolean):
        return "bool"
    if isinstance(t, (types.Integer, types.Float)):
        return str(t)
    if isinstance(t, types.BaseTuple):
        return ("tuple", *map(numba_key, t.types))
    raise TypeError(f"no ahead-of-time export for an argument of type {t}")


def numba_type(key):
    """The Numba type ``numba_key`` gave ``key`` (a key read back from JSON: lists)."""
    if key == "bool":
        return types.boolean
    if isinstance(key, str):
        return getattr(types, key)
    kind, *rest = key
    if kind == "array":
        dtype, ndim, layout, readonly, aligned = rest
        return types.Array(numba.from_dtype(np.dtype(dtype)), ndim, layout,
                           readonly=readonly, aligned=aligned)
    if kind == "tuple":
        return types.BaseTuple.from_types([numba_type(k) for k in rest])
    raise ValueError(f"not a type key: {key!r}")


def exercise() -> None:
    """Call the just-in-time kernels as real runs call them: the warm-up pattern (both
    matchers and strategies) and every committed pattern's examples with both matchers
    and strategies. Their dispatchers then list the argument types to compile."""
    kept = aot._LOADED
    aot._LOADED = aot.load("jit")  # the calls must reach Numba's dispatchers
    try:
        warm_up()
        for path in sorted(PATTERNS.glob("*.yaml")):
            if is_sidecar(path):  # a .sql row pattern's examples: not the kernels'
                continue
            pattern = load_pattern(path)
            if pattern.kind == "window":
                continue
            for example in pattern.examples:
                events = example_events(example)
                for matcher in ("ses", "zstream"):
                    for strategy in ("lazy", "eager"):
                        run(pattern, events, MatchOptions(matcher=matcher, strategy=strategy))
    finally:
        aot._LOADED = kept


def flipped(args) -> tuple:
    """The signature with its 2-D arrays in the other memory order (C <-> F): a matrix of
    one row is C- and F-contiguous, so the same call site can give either."""
    def flip(t):
        if isinstance(t, types.Array) and t.ndim == 2 and t.layout in "CF":
            return t.copy(layout="F" if t.layout == "C" else "C")
        return t
    return tuple(flip(t) for t in args)


def exercised() -> dict[str, list]:
    """{entry point: [[argument keys], return key]}: every signature the examples called
    it with, and each with its 2-D arrays in the other memory order, in a fixed order."""
    out: dict[str, list] = {}
    for name in ENTRY_POINTS:
        seen = []
        for sig in getattr(kernels, name).nopython_signatures:
            for args in (tuple(sig.args), flipped(sig.args)):
                entry = [[numba_key(t) for t in args], numba_key(sig.return_type)]
                entry = json.loads(json.dumps(entry))  # tuples as lists, as read back
                if entry not in seen:
                    seen.append(entry)
        if seen:
            out[name] = sorted(seen, key=json.dumps)
    return out


def listed() -> dict[str, list] | None:
    """The committed signatures (``SIGNATURES``), or None when there is no readable file."""
    try:
        return json.loads(SIGNATURES.read_text())
    except (OSError, ValueError):
        return None


def signatures_text(signatures: dict[str, list]) -> str:
    """The file's text: one signature a line, under its entry point."""
    return "{\n" + ",\n".join(
        f"{json.dumps(name)}: [\n" + ",\n".join(f" {json.dumps(e)}" for e in entries) + "\n]"
        for name, entries in signatures.items()) + "\n}\n"


def compile_module(signatures: dict[str, list], output_dir: Path) -> None:
    """Compile every signature into ``_kernels_aot`` in ``output_dir``, the i-th of an
    entry point's as its export ``<entry point>__<i>`` (``manifest_exports``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumbaPendingDeprecationWarning)
        from numba.pycc import CC  # deprecated, so imported only here, quietly
        cc = CC(MODULE)
    cc.output_dir = str(output_dir)
    cc.target_cpu = "host"  # built on the machine that runs it (make, once per checkout)
    cc.verbose = False
    for name, entries in manifest_exports(signatures).items():
        py_func = getattr(kernels, name).py_func
        for (export, _), (args, ret) in zip(entries, signatures[name]):
            cc.export(export, numba_type(ret)(*map(numba_type, args)))(py_func)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cc.compile()


def manifest_exports(signatures: dict[str, list]) -> dict[str, list]:
    """The manifest's exports: {entry point: [[export, [argument keys]], ...]}."""
    return {name: [[f"{name}__{i}", args] for i, (args, _) in enumerate(entries)]
            for name, entries in signatures.items()}


def build(output_dir: Path = HERE, echo=print) -> Path:
    """Compile every signature the kernels were called with into ``_kernels_aot`` and
    write its manifest; returns the manifest's path. The committed signatures are
    compiled by a second process meanwhile; when the examples' differ, they are compiled
    here afterwards and the committed file rewritten."""
    digest = source_digest()
    started = time.perf_counter()
    committed = listed()
    helper = None
    if committed is not None:
        helper = subprocess.Popen([sys.executable, "-m", "jobs.core.local.aot_build",
                                   COMPILE_LISTED, str(output_dir)])
    try:
        exercise()
    except BaseException:
        if helper is not None:
            helper.kill()  # its module would be of signatures nobody checked
        raise
    signatures = exercised()
    helped = helper is not None and helper.wait() == 0 and signatures == committed
    if not helped:
        if committed != signatures:
            SIGNATURES.write_text(signatures_text(signatures))
            echo(f"note: the kernels' signatures changed: {SIGNATURES.name} rewritten (commit it)")
        compile_module(signatures, output_dir)
    exports = manifest_exports(signatures)
    manifest = output_dir / MANIFEST.name
    manifest.write_text(json.dumps({"digest": digest, "exports": exports}, indent=1) + "\n")
    echo(f"ahead-of-time kernels: {sum(map(len, exports.values()))} signatures of "
         f"{len(exports)} entry points compiled in {time.perf_counter() - started:.0f} s"
         + ("" if helped else " (one process)"))
    return manifest


if __name__ == "__main__":
    if sys.argv[1:2] == [COMPILE_LISTED]:
        compile_module(listed() or {}, Path(sys.argv[2]))
    else:
        build()
    sys.exit(0)
