"""The pattern language: the frozen pattern model (``pattern``), conditions and value
expressions (``conditions``: the tree, the parser, the type checks, the kinds of
conditions, the three-valued evaluator), measures' types, events and times, pattern-based
windows (``window``, ``window_conditions``) and the pattern files that hold them
(``patternfile``: safe YAML → a pattern, every problem with ``path:line``). It imports
nothing else of the project but ``core.errors`` and ``core.inputs``; every other part of
core is written against it.
"""
