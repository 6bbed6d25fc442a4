"""``python -m jobs …``: see ``jobs.cli``."""

import sys

from .cli import main

sys.exit(main())
