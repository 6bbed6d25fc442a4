"""Entry file for spark-submit: ``spark-submit --py-files jobs.zip spark_entry.py run …``
(the same subcommands as ``python -m jobs``)."""

from jobs.cli.main import exit_now, main

if __name__ == "__main__":
    exit_now(main())
