"""Pattern files, both kinds: ``load_pattern`` reads one, checks it as data (nodes), and
hands its tree to the parser of its kind (sequence or window); ``check_schema`` checks a
parsed pattern against its source's columns."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from jobs.core.inputs import refusal
from jobs.core.language.pattern import Disjunction, Pattern
from jobs.core.language.patternfile.nodes import PatternError, Problem, compose, file_kind
from jobs.core.language.patternfile.schema import check_schema
from jobs.core.language.patternfile.sequence import REQUIRED, parse_sequence
from jobs.core.language.patternfile.window import parse_window
from jobs.core.language.window import WindowPattern

__all__ = ["PatternError", "Problem", "check_schema", "load_pattern", "parse_pattern",
           "read_pattern_text"]


def load_pattern(path: str | Path) -> Pattern | Disjunction | WindowPattern:
    """Read and validate one pattern file; raises ``PatternError``."""
    path = Path(path)
    return parse_pattern(read_pattern_text(path), str(path))


def read_pattern_text(path: Path) -> str:
    """The text of a pattern file (YAML, ``.sql`` or a sidecar): a regular UTF-8 file, or
    a ``PatternError`` saying why not."""
    refused = refusal(path)
    if refused:
        raise PatternError([Problem(str(path), 0, f"the file {refused}")])
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PatternError([Problem(str(path), 0, f"cannot read the file: {exc.strerror}")]) from None
    except UnicodeDecodeError:
        raise PatternError([Problem(str(path), 0, "the file is not UTF-8 text")]) from None


def parse_pattern(text: str, path: str = "<pattern>") -> Pattern | Disjunction | WindowPattern:
    """Parse and validate the text of a pattern file; raises ``PatternError``. A file
    with ``alternatives:`` gives a ``Disjunction``, one with ``kind: window`` a
    ``WindowPattern``. The same text and path give the same (frozen) pattern, parsed once
    per process: a long-lived process (the warm session's steps, the tests) loads the
    catalogue for each pattern it runs, which parsed every file of the folder each time."""
    return _parse(text, path)


@lru_cache(maxsize=1024)
def _parse(text: str, path: str) -> Pattern | Disjunction | WindowPattern:
    root = compose(text, path, ", ".join(REQUIRED))
    if file_kind(root, path) == "window":
        return parse_window(root, path)
    return parse_sequence(root, path)
