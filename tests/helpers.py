from pathlib import Path

from jobs.core.events import read_events
from jobs.core.loader import load_pattern, parse_pattern

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "data" / "examples"


def chemo_mw():
    return read_events(EXAMPLES / "chemo_match_windows.csv")


def chemo_ses():
    return read_events(EXAMPLES / "chemo_ses.csv")


def pattern_file(name: str):
    return load_pattern(ROOT / "patterns" / f"{name}.yaml")


def pattern_text(text: str, **kw):
    return parse_pattern(text, "<test>")


def keys(matches) -> set:
    """Matches as {frozenset of (variable, (ids...))} for comparisons."""
    return {tuple(sorted(m.key)) for m in matches}


def as_dicts(matches) -> list[dict]:
    return [{v: list(ids) for v, ids in m.key} for m in sorted(matches, key=lambda m: m.sort_key())]
