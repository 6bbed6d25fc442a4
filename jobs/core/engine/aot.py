"""The matching kernels compiled ahead of time, so a process does not pay Numba's start-up.

Numba compiles ``kernels`` just in time and caches the machine code, but a process still
pays for importing Numba and for its code generator's first use (about 0.35 s on the
2-core machine) before the first match: more than the whole matching of a small input.
``aot_build`` (run by ``make`` once per checkout and whenever the kernels change) compiles their
entry points with ``numba.pycc`` into the extension module ``jobs/core/_kernels_aot``, one
export per argument signature that the committed patterns' examples and the warm-up pattern
use, and writes a manifest beside it: those signatures and a digest of the kernels' source.
``load`` imports that module without Numba, and falls back to the just-in-time kernels when
there is no module, when the kernels' source changed since it was built (the digest), or,
call by call, when a call's argument types are not among the compiled signatures. The
fallback gives the same results: the same functions, compiled by the same compiler.

    python -m jobs.core.local.aot_build      # make does this (``aot_build``)
    python -m jobs.core.engine.aot            # which kernels a process would use
    SES_KERNELS=jit ses match ...      # the just-in-time kernels, whatever is built
"""

from __future__ import annotations

import hashlib
import importlib
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from jobs import environment
from jobs.core.engine import kernel_codes

HERE = Path(__file__).resolve().parent
MODULE = "_kernels_aot"
MANIFEST = HERE / f"{MODULE}.json"
SOURCE = HERE / "kernels.py"
PATTERNS = HERE.parents[2] / "patterns"  # the committed patterns (their examples)
ENTRY_POINTS = ("scan_windows", "zstream_windows", "ses_windows", "ses_eager", "negation_keep",
                "running_keep")


def source_digest() -> str:
    """The digest of the kernels' source (and their shared codes): a module built from
    other source is not used."""
    h = hashlib.sha256()
    for path in (SOURCE, HERE / "kernel_codes.py"):
        h.update(path.read_bytes())
    return h.hexdigest()


# -- argument types ---------------------------------------------------------------------
# A call is routed to a compiled export only if each argument has the type Numba would
# give it (``numba.typeof``), computed here without Numba.

def arg_key(x):
    """The type of one argument, as Numba types it: a string or a tuple (the manifest's JSON
    lists, ``frozen``)."""
    if isinstance(x, np.ndarray):
        layout = "C" if x.flags.c_contiguous else "F" if x.flags.f_contiguous else "A"
        return ("array", x.dtype.str, x.ndim, layout, not x.flags.writeable,
                bool(x.flags.aligned))
    if isinstance(x, (bool, np.bool_)):
        return "bool"
    if isinstance(x, np.generic):
        return x.dtype.name
    if isinstance(x, int):
        return "int64"
    if isinstance(x, float):
        return "float64"
    if isinstance(x, tuple):
        return ("tuple", *map(arg_key, x))
    return f"unsupported:{type(x).__name__}"


def frozen(key):
    """A manifest's key (JSON lists) as ``arg_key`` gives it (tuples)."""
    return tuple(frozen(k) for k in key) if isinstance(key, list) else key


# -- loading ----------------------------------------------------------------------------
@dataclass
class Loaded:
    """Which kernels this process uses: ``mode`` 'aot' or 'jit', and why not 'aot'; the
    seconds spent making them callable (for 'jit': importing Numba and the kernels, and, on
    each entry point's first call, loading its machine code from Numba's cache)."""

    mode: str
    seconds: float
    reason: str = ""
    fallback_calls: int = 0


class Kernel:
    """One entry point: the compiled export whose signature matches the call's arguments,
    else the just-in-time kernel."""

    def __init__(self, name: str, exports: dict, loaded: Loaded):
        self.name, self.exports, self.loaded = name, exports, loaded

    def __call__(self, *args):
        fn = self.exports.get(tuple(arg_key(a) for a in args))
        if fn is None:
            self.loaded.fallback_calls += 1
            fn = getattr(_jit(), self.name)
        return fn(*args)


class JitKernel:
    """One entry point compiled just in time: its first call first makes Numba load (or
    compile) the machine code for the call's argument types, timed as loading."""

    def __init__(self, name: str, loaded: Loaded):
        self.name, self.loaded, self.dispatcher = name, loaded, getattr(_jit(), name)
        self.ready = False

    def __call__(self, *args):
        if not self.ready:
            started = time.perf_counter()
            d = self.dispatcher
            d.compile(tuple(d.typeof_pyval(a) for a in args))
            self.loaded.seconds += time.perf_counter() - started
            self.ready = True
        return self.dispatcher(*args)


class Kernels:
    """What the engine calls: the entry points and the status codes."""

    DONE, FULL, CAP, BUDGET = (kernel_codes.DONE, kernel_codes.FULL, kernel_codes.CAP,
                               kernel_codes.BUDGET)

    def __init__(self, entry_points: dict, loaded: Loaded):
        self.__dict__.update(entry_points)
        self.loaded = loaded


_LOADED: Kernels | None = None


def _jit():
    from jobs.core.engine import kernels

    return kernels


def load(mode: str | None = None) -> Kernels:
    """The kernels for this process (once per process); ``mode='jit'`` (or the environment
    variable ``SES_KERNELS=jit``) forces the just-in-time kernels."""
    global _LOADED
    if _LOADED is not None and mode is None:
        return _LOADED
    started = time.perf_counter()
    shared = mode is None  # the process's kernels, kept; an explicit mode is not kept
    if shared and environment.get("SES_KERNELS") == "jit":
        mode = "jit"
    manifest, module, reason = (None, None, "forced") if mode == "jit" else _built()
    if manifest is not None:
        loaded = Loaded("aot", 0.0)
        entry = {}
        for name in ENTRY_POINTS:
            exports = {frozen(key): getattr(module, export)
                       for export, key in manifest["exports"].get(name, [])}
            entry[name] = Kernel(name, exports, loaded)
    else:
        loaded = Loaded("jit", 0.0, reason)
        entry = {name: JitKernel(name, loaded) for name in ENTRY_POINTS}
    loaded.seconds += time.perf_counter() - started
    kernels = Kernels(entry, loaded)
    if shared:
        _LOADED = kernels
    return kernels


def _built() -> tuple[dict | None, object, str | None]:
    """The manifest and the module of a usable ahead-of-time build, or why there is none."""
    if not MANIFEST.exists():
        return None, None, "not built (make builds it: python -m jobs.core.local.aot_build)"
    try:
        manifest = json.loads(MANIFEST.read_text())
    except (OSError, ValueError) as exc:
        return None, None, f"unreadable manifest {MANIFEST.name}: {exc}"
    if manifest.get("digest") != source_digest():
        return None, None, "kernels.py changed since the build (make rebuilds it)"
    try:
        return manifest, importlib.import_module(f"jobs.core.engine.{MODULE}"), None
    except ImportError as exc:
        return None, None, f"cannot import {MODULE}: {exc}"


if __name__ == "__main__":
    k = load()
    print(f"kernels: {k.loaded.mode}" + (f" ({k.loaded.reason})" if k.loaded.reason else "")
          + f", loaded in {k.loaded.seconds * 1000:.0f} ms")
    sys.exit(0)
