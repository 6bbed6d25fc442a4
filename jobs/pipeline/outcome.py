"""The outcome of one pattern in one run, made in one place from its record or from any
exception (as dbt's ``safe_run`` makes a ``RunResult``): ``PatternOutcome``. Run,
backfill, the DAG's step commands, pr-check and the summary all read it.

Whether a failure is *final* (a retry cannot mend it: the pattern file, its events, its
suite, its limits) or *retryable* (Spark, storage, a busy lake) is decided by one
function, ``error_kind``, from the error's class: a ``UserError`` is final unless it is
``Transient``; an error an executor raised is known by the class its Spark task carries
(``error_type``), never by words of its message.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from jobs.core.engine.batches import MatchCapExceeded
from jobs.core.errors import EXIT_FAILED, EXIT_INPUT, EXIT_RETRY, Transient, UserError
from jobs.lake.store import BrokenTable, broken_in
from jobs.runrecord import RunRecord
from jobs.status import FAILED, SUCCESS

FINAL, RETRYABLE = "final", "retryable"
# errors the executors raise that a retry cannot mend (the window cap, the memory budget)
FINAL_TYPES = frozenset(t.__name__ for t in (MatchCapExceeded, *MatchCapExceeded.__subclasses__()))
# the last line of a Python traceback: ``package.module.Class: message`` (or ``Class``)
_RAISED = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Z][\w]*)(?::\s?(.*))?$")
_TRACE = "Traceback (most recent call last)"
_MARKERS = ("MatchCapExceeded: ", "MatchBudgetExceeded: ", "ArrowInvalid: ", "MemoryError",
            "Python worker exited unexpectedly")


def _raised_line(text: str) -> str | None:
    """The line that names the error of the last Python traceback in ``text`` (a Spark
    task's error carries its executor's traceback), or None."""
    if _TRACE not in text:
        return None
    trace = text[text.rindex(_TRACE):].split("JVM stacktrace")[0]
    causes = [line for line in trace.splitlines()[1:]
              if line.strip() and not line.startswith((" ", "\t"))]
    return causes[-1] if causes else None


def error_type(exc: BaseException) -> str:
    """The class name of what went wrong: the exception's own, or for a Spark error that
    carries an executor's Python error, that error's class."""
    if isinstance(exc, UserError):
        return type(exc).__name__
    line = _raised_line(str(exc))
    found = _RAISED.match(line) if line else None
    return found.group(1) if found else type(exc).__name__


def error_kind(exc: BaseException) -> str:
    """``FINAL`` or ``RETRYABLE``: the one rule (module docstring)."""
    if isinstance(exc, Transient):
        return RETRYABLE
    if isinstance(exc, (UserError, MatchCapExceeded)) or error_type(exc) in FINAL_TYPES:
        return FINAL
    return RETRYABLE


def short_error(exc: BaseException) -> str:
    """One line for people: a Spark task's error is reduced to the Python error it
    carries; a data file of the lake Spark cannot read, to the table it belongs to."""
    if isinstance(exc, BrokenTable):
        return str(exc)[:1000]
    text = str(exc)
    broken = broken_in(text)
    if broken is not None:
        return str(broken)
    for marker in _MARKERS:
        if marker in text:
            return text[text.index(marker):].splitlines()[0][:1000]
    line = _raised_line(text)
    if line:
        return line[:1000]
    first = text.strip().splitlines()[0] if text.strip() else ""
    return f"{type(exc).__name__}: {first}"[:1000]


@dataclass(frozen=True)
class PatternOutcome(Mapping):
    """One pattern's outcome: its runs-table record (counters, timings, status, message)
    and, when it failed, the error's kind (``FINAL``/``RETRYABLE``), class and the
    exception itself. Read as a mapping, it is its record (``o["matches"]``)."""

    record: RunRecord
    kind: str | None = None  # FINAL or RETRYABLE when failed
    error_type: str | None = None
    error: BaseException | None = field(default=None, compare=False, repr=False)

    @classmethod
    def published(cls, record: RunRecord) -> PatternOutcome:
        return cls(record)

    @classmethod
    def failed(cls, run_id: str, pattern: str, exc: BaseException,
               message: str | None = None) -> PatternOutcome:
        """The one place a failure becomes an outcome (``message``: when the caller has a
        better line than ``short_error``'s)."""
        return cls(RunRecord(run_id, pattern=pattern, status=FAILED,
                             message=message or short_error(exc)),
                   error_kind(exc), error_type(exc), exc)

    @property
    def ok(self) -> bool:
        return self.record.status == SUCCESS

    @property
    def final(self) -> bool:
        return self.kind == FINAL

    @property
    def pattern(self) -> str:
        return self.record.pattern

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def message(self) -> str | None:
        return self.record.message

    def line(self) -> str:
        """One line: ``pattern: status`` and, for a failure, its kind and message."""
        if self.ok:
            return f"{self.pattern}: {self.status}, {self.record.matches} match(es)"
        return f"{self.pattern}: {self.status} ({self.kind}): {self.message}"

    def __getitem__(self, key: str):
        return self.record[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.record)

    def __len__(self) -> int:
        return len(self.record)


def exit_code(outcomes: list[PatternOutcome]) -> int:
    """0 when every pattern succeeded; ``EXIT_INPUT`` when every failure is final (a retry
    cannot mend it); ``EXIT_RETRY`` when every one is transient (rerun as it is);
    ``EXIT_FAILED`` otherwise (the DAG retries it)."""
    failed = [o for o in outcomes if not o.ok]
    if not failed:
        return 0
    if all(o.final for o in failed):
        return EXIT_INPUT
    return EXIT_RETRY if all(isinstance(o.error, Transient) for o in failed) else EXIT_FAILED
