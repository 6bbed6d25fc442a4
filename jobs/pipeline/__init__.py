"""The nightly pipeline, in phases: ``ingest`` (landing files into events, behind the
events suite), ``match`` (tonight's range, plans, phase 1 on Spark, phase 2 on the
executors), ``validate`` (the Great Expectations suites), ``publish`` (match tables, the
runs table's rows, SQL models) and ``upkeep`` (repair, retraction, health, lineage).
``run`` runs a night through them with one ``RunContext`` (``context``); each step's
outcome is one value (``outcome``); ``report`` prints the night's summary."""
