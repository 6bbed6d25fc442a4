"""``python -m jobs …``: see ``jobs.cli``."""

from .cli import exit_now, main

exit_now(main())
