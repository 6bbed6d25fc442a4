"""The match phase: tonight's range of each pattern (``horizons``, from the runs that
decide it, ``jobs.lake.runs.planning_runs``), its plan (``planning``), phase 1 on Spark
(filter, partition, the necessary conditions: ``phase1``) and phase 2 on the executors
(the matcher per group: ``phase2``), many patterns of one source in one pass
(``source_pass``), the first-ever state (``first_ever``), the staged run handed to
validation and publication (``staged``), and the steps a night runs (``steps``)."""
