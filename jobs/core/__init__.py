"""The matching core, pure Python without Spark, in four parts (docs/architecture.md):

``language`` (the pattern model, conditions, windows, pattern files) at the bottom;
``plans`` (ZStream's join trees, their cost model, the generators, the JSON form) and
``reference`` (the oracle: what a pattern means, by brute force) on it; ``engine`` (the
compiled patterns, columns, Numba kernels and their ahead-of-time build, the window
engine) on the language and the plans; ``local`` (a pattern over a list of events with
either, the pattern files' examples) on top. ``errors`` and ``inputs`` serve all of them.
"""
