"""Values a row pattern's expressions compute besides SQL's numbers, text and booleans:
a timestamp and an interval, both exact nanoseconds."""

from __future__ import annotations

from jobs.core.language.events import format_ts

UNITS_NS = {"SECOND": 10**9, "MINUTE": 60 * 10**9, "HOUR": 3600 * 10**9,
            "DAY": 86400 * 10**9, "WEEK": 7 * 86400 * 10**9}


class Ts(int):
    """A timestamp: nanoseconds since the epoch, UTC."""

    def __sub__(self, other):
        if isinstance(other, Ts):
            return Interval(int(self) - int(other))
        if isinstance(other, Interval):
            return Ts(int(self) - int(other))
        return NotImplemented

    def __add__(self, other):
        if isinstance(other, Interval):
            return Ts(int(self) + int(other))
        return NotImplemented

    __radd__ = __add__

    def __repr__(self) -> str:
        return f"TIMESTAMP '{format_ts(int(self))}'"

    def json(self) -> str:
        return format_ts(int(self))


class Interval(int):
    """A length of time in nanoseconds (``INTERVAL '15' DAY``, ``ts - PREV(ts)``)."""

    def __add__(self, other):
        if isinstance(other, Interval):
            return Interval(int(self) + int(other))
        if isinstance(other, Ts):
            return Ts(int(self) + int(other))
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, Interval):
            return Interval(int(self) - int(other))
        return NotImplemented

    def __neg__(self):
        return Interval(-int(self))

    def __repr__(self) -> str:
        return f"INTERVAL '{int(self) / 10**9:g}' SECOND"

    def json(self) -> float:
        return int(self) / 10**9  # seconds


def json_value(value):
    """A measure's value as JSON: timestamps as ISO text, intervals in seconds."""
    if isinstance(value, (Ts, Interval)):
        return value.json()
    if isinstance(value, list):
        return [json_value(v) for v in value]
    return value
