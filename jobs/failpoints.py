"""Named points where the fault tests kill the process (``SES_FAILPOINT=name``).

The pipeline calls ``reached(name)`` at the moments where a crash matters most (between
the events and the ingest log, between the matches commit and the runs row, ...). In
normal runs the variable is unset and the call costs one dictionary lookup; the tests in
``tests/faults/`` set it and check that the lake is consistent after a SIGKILL there.
"""

from __future__ import annotations

import os
import signal

from jobs import environment


def reached(name: str) -> None:
    if environment.get("SES_FAILPOINT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
