"""The Python daemon of a local session's executors (``spark.python.daemon.module``):
PySpark's own daemon, with ``pyspark`` and ``py4j`` imported from the installed packages
instead of the zip files Spark puts first on its workers' ``PYTHONPATH``.

Python imports a module from a zip without its compiled bytecode: the daemon compiled
PySpark's modules from source at every session's start (0.7 s against 0.2 s), and every
worker it forks compiled again the modules its task needs (``pyspark.worker``, the Arrow
serializers). The installed packages are the same release (the zip ships inside the
``pyspark`` package) and have their bytecode. A session whose executors run elsewhere
keeps PySpark's daemon: there this project may not be installed (``session.session_conf``).
"""

from __future__ import annotations

import runpy
import sys


def without_zips(path: list[str]) -> list[str]:
    """``path`` with Spark's ``pyspark.zip`` and ``py4j-*.zip`` moved to its end (kept, so
    a Python without the packages installed still finds them)."""
    zips = [p for p in path if p.endswith(".zip") and p.rsplit("/", 1)[-1].startswith(
        ("pyspark", "py4j"))]
    return [p for p in path if p not in zips] + zips


if __name__ == "__main__":
    sys.path[:] = without_zips(sys.path)
    runpy.run_module("pyspark.daemon", run_name="__main__")
