"""Entry file for spark-submit: ``spark-submit --py-files jobs.zip spark_entry.py run …``
(the same subcommands as ``python -m jobs``)."""

import sys

from jobs.cli import main

if __name__ == "__main__":
    sys.exit(main())
