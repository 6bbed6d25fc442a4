"""Building the ahead-of-time kernels (``aot``): run what gives the kernels their argument
types, then compile each entry point for those signatures with ``numba.pycc``.

    python -m jobs.core.local.aot_build      # make runs it once per checkout and when kernels change
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from numba.core import types
from numba.core.errors import NumbaPendingDeprecationWarning

from jobs.core.engine import aot, kernels
from jobs.core.engine.aot import ENTRY_POINTS, HERE, MANIFEST, MODULE, PATTERNS, source_digest
from jobs.core.language.patternfile import load_pattern
from jobs.core.local.examples import example_events
from jobs.core.local.runner import MatchOptions, run, warm_up


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


def exercise() -> None:
    """Call the just-in-time kernels as real runs call them: the warm-up pattern (both
    matchers and strategies) and every committed pattern's examples with both matchers
    and strategies. Their dispatchers then list the argument types to compile."""
    kept = aot._LOADED
    aot._LOADED = aot.load("jit")  # the calls must reach Numba's dispatchers
    try:
        warm_up()
        for path in sorted(PATTERNS.glob("*.yaml")):
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


def build(output_dir: Path = HERE, echo=print) -> Path:
    """Compile every signature the kernels were called with into ``_kernels_aot`` and
    write its manifest; returns the manifest's path."""
    digest = source_digest()
    exercise()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NumbaPendingDeprecationWarning)
        from numba.pycc import CC  # deprecated, so imported only here, quietly

        cc = CC(MODULE)
    cc.output_dir = str(output_dir)
    cc.target_cpu = "host"  # built on the machine that runs it (make, once per checkout)
    cc.verbose = False
    exports: dict[str, list] = {}
    for name in ENTRY_POINTS:
        dispatcher = getattr(kernels, name)
        seen: list[tuple] = []
        for sig in dispatcher.nopython_signatures:
            for args in (tuple(sig.args), flipped(sig.args)):
                if args in seen:
                    continue
                seen.append(args)
                export = f"{name}__{len(seen) - 1}"
                cc.export(export, sig.return_type(*args))(dispatcher.py_func)
                exports.setdefault(name, []).append([export, [numba_key(t) for t in args]])
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cc.compile()
    manifest = output_dir / MANIFEST.name
    manifest.write_text(json.dumps({"digest": digest, "exports": exports}, indent=1) + "\n")
    echo(f"ahead-of-time kernels: {sum(map(len, exports.values()))} signatures of "
         f"{len(exports)} entry points compiled in {time.perf_counter() - started:.0f} s")
    return manifest


if __name__ == "__main__":
    build()
    sys.exit(0)
