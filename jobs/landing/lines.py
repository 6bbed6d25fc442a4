"""A piece of a landing file as text: the piece as one Arrow value without a copy, and the
text of one of its lines, found when a record is quarantined (the line ends are found on
the first call, not for every piece)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa


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


def one_value(piece: bytes) -> pa.Array:
    """``piece`` as a binary array of one value over the bytes themselves (``pa.array``
    copies them through a builder: 2.5 ns a byte)."""
    offsets = np.array([0, len(piece)], np.int32)
    return pa.Array.from_buffers(pa.binary(), 1, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(piece)])
