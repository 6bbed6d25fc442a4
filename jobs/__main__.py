"""``python -m jobs …``: see ``jobs.cli.main``."""

from jobs.cli.main import exit_now, main

exit_now(main())
