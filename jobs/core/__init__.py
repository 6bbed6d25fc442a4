"""The matching core: pattern model and parser, oracle, SES automaton, match windows.

Pure Python, no Spark: it runs and tests in milliseconds and serves ``ses match``.
"""
