"""The catalogue's picture of a pattern shows each variable with its own conditions."""

from pathlib import Path

from jobs.core.language.patternfile import load_pattern
from jobs.site.pictures import _rows, pattern_shape, relations

ROOT = Path(__file__).resolve().parents[2]


def test_each_variable_is_drawn_with_its_conditions(tmp_path):
    p1 = load_pattern(ROOT / "patterns" / "mw_chemo_p1.yaml")
    [(_, columns)] = _rows(p1)
    assert columns[0][1].splitlines() == ["p+", "p.type = 'P'", "prev(p.value) < p.value"]
    assert relations(p1) == ["c.patient = p.patient", "p.patient = b.patient"]
    history = load_pattern(ROOT / "patterns" / "hospital_ca125_with_history_no_prior_chemo.yaml")
    [(_, [[box]])] = _rows(history)
    assert "history: at least 1 of" in box and max(len(x) for x in box.splitlines()) <= 30
    assert pattern_shape(p1, tmp_path / "p1.png").stat().st_size > 1000
