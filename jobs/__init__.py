"""Nightly SES pattern matching over event histories (see README.md).

``jobs.core`` is the pure-Python matching core (no Spark import); the other modules are
the command line and, later, the Spark job entry points.
"""
