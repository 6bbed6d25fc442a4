"""The text of one line of a piece of a landing file, found when a record is quarantined
(the line ends are found on the first call, not for every piece)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def line_at(body) -> Callable[[int], str]:
    """``text(i)``: line ``i`` of ``body`` (bytes), without its line end or a carriage
    return before it."""
    ends: list[np.ndarray] = []

    def text(i: int) -> str:
        if not ends:
            ends.append(np.flatnonzero(np.frombuffer(body, np.uint8) == 10))
        at = ends[0]
        lo = int(at[i - 1]) + 1 if i else 0
        hi = int(at[i]) if i < len(at) else len(body)
        return bytes(body[lo:hi]).decode("utf-8").rstrip("\r")

    return text
