from pathlib import Path

from jobs.core.language.events import read_events
from jobs.core.language.patternfile import load_pattern, parse_pattern

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "data" / "landing"


def chemo_mw():
    return read_events(EXAMPLES / "chemo_mw" / "chemo_match_windows.csv")


def chemo_ses():
    return read_events(EXAMPLES / "chemo_ses" / "chemo_ses.csv")


def pattern_file(name: str):
    return load_pattern(ROOT / "patterns" / f"{name}.yaml")


def pattern_text(text: str, **kw):
    return parse_pattern(text, "<test>")


def keys(matches) -> set:
    """Matches as {frozenset of (variable, (ids...))} for comparisons (with the
    alternative first for a disjunction's matches)."""
    return {tuple(sorted(m.key)) if m.alternative is None else
            (m.alternative, tuple(sorted(m.key))) for m in matches}


def as_dicts(matches) -> list[dict]:
    return [{v: list(ids) for v, ids in m.key} for m in sorted(matches, key=lambda m: m.sort_key())]


SHARED_REAL = ROOT.parent / "shared" / "data" / "real"


def real_slice(name: str, patients: int, time_column: str = "timestamp",
               patient_column: str = "patient"):
    """The events of the first ``patients`` patients (sorted ids) of a real log, with a
    stable event_id (row number in the file)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from jobs.core.language.events import events_from_arrow

    table = pq.read_table(SHARED_REAL / f"{name}.parquet")
    ids = sorted({p for p in table.column(patient_column).to_pylist() if p is not None})[:patients]
    table = table.append_column("event_id", pa.array([f"r{i:06d}" for i in range(table.num_rows)]))
    table = table.filter(pc.is_in(table.column(patient_column), value_set=pa.array(ids)))
    return events_from_arrow(table, time_column=time_column)


def assert_problem(text, line, fragment):
    """Parsing ``text`` reports a problem on ``line`` whose message has ``fragment``."""
    import pytest

    from jobs.core.language.patternfile import PatternError

    with pytest.raises(PatternError) as info:
        parse_pattern(text, "f.yaml")
    found = [(p.line, p.message) for p in info.value.problems]
    assert any(ln == line and fragment in msg for ln, msg in found), found
