"""The engine: a pattern compiled once (``compiled``, ``programs``) and run many times over
columns of events (``columns``): match windows and their necessary conditions, then the SES
automaton or the ZStream join (``runtime``), in Numba kernels (``kernels``, with
``kernel_codes`` shared with Python) loaded compiled ahead of time when they can be
(``aot``); aggregate conditions and measures on whole matches (``aggregates``,
``measures``), the match rows it emits (``output``) and the pattern-based window matcher
(``window_matcher``). It must agree with ``core.reference`` on every input.
"""
