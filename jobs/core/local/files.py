"""One pattern over one events file, as ``ses match`` runs it, without Spark: the file's
columns read (only those the pattern reads), checked against what the pattern reads,
marked and compiled, matched by the pattern's matcher (or the oracle), and the matches
written as JSON lines batch by batch, so memory does not grow with their number.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from jobs.core.engine.batches import MatchStats
from jobs.core.engine.columns import read_columns
from jobs.core.engine.marks import marked_compiled
from jobs.core.engine.options import MatchOptions
from jobs.core.engine.runtime import compile_pattern
from jobs.core.engine.window_matcher import execute_windows, json_rows, sorted_batches
from jobs.core.errors import InputError
from jobs.core.language.events import read_events
from jobs.core.language.patternfile import check_schema
from jobs.core.language.window import oracle_windows
from jobs.core.local.runner import run, write_matches


@dataclass(frozen=True)
class EventsFile:
    """A CSV (with a header) or Parquet file of events, and its id and time columns."""

    path: str
    id_column: str = "event_id"
    time_column: str = "ts"

    def columns(self, names):
        return read_columns(self.path, names, id_column=self.id_column,
                            time_column=self.time_column)

    def events(self):
        return read_events(self.path, self.id_column, self.time_column)


class SchemaMismatch(InputError):
    """The file lacks a column the pattern reads, or holds it with another type: one
    message per problem, each naming the file."""

    def __init__(self, problems: list[str], path: str):
        super().__init__("\n".join(f"{p} [against {path}]" for p in problems))


def match_file(pattern, events: EventsFile, options: MatchOptions,
               write: Callable[[bytes], object]) -> dict:
    """The matches of ``pattern`` over ``events``, written as JSON lines (``write``);
    returns the run's counters (``read_seconds`` among them). Raises ``EventFileError``
    for a file that cannot be read, ``SchemaMismatch``, and ``MatchCapExceeded`` when a
    window's partial matches pass the cap."""
    if pattern.kind == "window":
        return _match_windows(pattern, events, options, write)
    read = [0.0]

    def columns_of(names):
        started = time.perf_counter()
        cols, schema = events.columns(names)
        read[0] += time.perf_counter() - started
        problems = check_schema(pattern, schema) if cols.n else []
        if problems:
            raise SchemaMismatch(problems, events.path)
        return cols

    if options.matcher == "bruteforce":  # the oracle marks what it needs itself
        columns_of(pattern.stored_attributes if pattern.marks_needed
                   else compile_pattern(pattern).attributes)
        matches, stats = run(pattern, events.events(), options)
        write("".join(m.to_json() + "\n" for m in matches).encode())
    else:
        # the file is the whole history: a pattern that needs marks gets them from it
        run_pattern, compiled, cols = marked_compiled(pattern, columns_of)
        stats = write_matches(run_pattern, compiled, cols, options, write)
    return {**stats, "read_seconds": round(read[0], 6)}


def _match_windows(pattern, events: EventsFile, options: MatchOptions,
                   write: Callable[[bytes], object]) -> dict:
    """A ``kind: window`` file: one JSON line per output window."""
    if options.matcher not in (None, "bruteforce"):
        raise InputError(f"{pattern.name} is a window pattern: --matcher applies to sequence "
                         "patterns only (use bruteforce for the oracle)")
    cols, schema = events.columns(sorted(pattern.attributes))
    problems = check_schema(pattern, schema) if cols.n else []
    if problems:
        raise SchemaMismatch(problems, events.path)
    st = MatchStats()
    if options.matcher == "bruteforce":
        found = oracle_windows(pattern, events.events())
        write("".join(w.to_json(pattern) + "\n" for w in found).encode())
        st.matcher, st.matches = "bruteforce", len(found)
    else:
        batch = sorted_batches(list(execute_windows(pattern, cols, options, st)))
        write(json_rows(pattern, batch, cols))
    return st.as_dict()
