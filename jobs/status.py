"""The one status vocabulary of the runs table, the run summary, ``runs`` and the models:
a pattern run or a model is ``success`` or ``failed``; a model whose parent failed is
``skipped``; a run that a crash left half-done and ``reconcile`` closed is ``aborted``."""

SUCCESS = "success"
FAILED = "failed"
SKIPPED = "skipped"
ABORTED = "aborted"
