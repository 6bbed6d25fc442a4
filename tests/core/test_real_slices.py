"""The SES matcher on slices of the real logs (../shared/data/real): every strategy and
pruning combination returns exactly the oracle's matches."""

import pytest

from jobs.core.local.runner import run
from jobs.core.reference import oracle

from ..helpers import SHARED_REAL, keys, pattern_text, real_slice
from .test_ses_matcher import COMBINATIONS

pytestmark = pytest.mark.skipif(not SHARED_REAL.exists(), reason="../shared/data/real is missing")

SEPSIS = {
    "triage_then_antibiotics": """\
name: triage_then_antibiotics
source: sepsis
within: 1d
sets: [[r], [l, c], [a]]
conditions:
  - r.event_type = 'ER Registration'
  - l.event_type = 'Leucocytes'
  - c.event_type = 'CRP'
  - a.event_type = 'IV Antibiotics'
  - r.patient = l.patient
  - l.patient = c.patient
  - c.patient = a.patient
""",
    "rising_crp_then_admission": """\
name: rising_crp_then_admission
source: sepsis
within: 7d
sets: [[c+], [a]]
conditions:
  - c.event_type = 'CRP'
  - a.event_type != 'CRP'
  - a.event_type != 'Leucocytes'
  - c.patient = a.patient
  - prev(c.value) < c.value
""",
}
HOSPITAL = {
    "blood_counts_then_consult": """\
name: blood_counts_then_consult
source: hospital
within: 7d
sets: [[h, l+], [v]]
conditions:
  - h.event_type = 'hemoglobine foto-elektrisch'
  - l.event_type = 'leukocyten tellen elektronisch'
  - v.event_type = 'vervolgconsult poliklinisch'
  - h.patient = l.patient
  - l.patient = v.patient
""",
    "electrolytes_any_order": """\
name: electrolytes_any_order
source: hospital
within: 2d
sets: [[k+, n, c]]
conditions:
  - k.event_type = 'kalium potentiometrisch'
  - n.event_type = 'natrium vlamfotometrisch'
  - c.event_type = 'creatinine'
  - k.patient = n.patient
  - n.patient = c.patient
""",
}


@pytest.fixture(scope="module")
def sepsis():
    return real_slice("sepsis", 120)


@pytest.fixture(scope="module")
def hospital():
    return real_slice("bpi2011_hospital", 12)


def check_all(pattern, events):
    expected = keys(oracle.ses_exec(pattern, events))
    assert expected, "the slice should hold matches"
    for options in COMBINATIONS:
        assert keys(run(pattern, events, options)[0]) == expected, options


@pytest.mark.parametrize("name", sorted(SEPSIS))
def test_sepsis_slice(sepsis, name):
    check_all(pattern_text(SEPSIS[name]), sepsis)


@pytest.mark.parametrize("name", sorted(HOSPITAL))
def test_hospital_slice(hospital, name):
    check_all(pattern_text(HOSPITAL[name]), hospital)


def all_matches_per_partition(pattern, events):
    """Def. 2 per partition: with X non-empty no match mixes partitions (its equalities
    would fail), so the union over partitions is every match, and far cheaper to enumerate."""
    assert pattern.partition_attributes
    out = []
    for part in oracle.partitions(pattern, events).values():
        out.extend(oracle.all_matches(pattern, part))
    return out


@pytest.mark.parametrize("name", ["triage_then_antibiotics", "blood_counts_then_consult",
                                  "electrolytes_any_order"])
def test_zstream_real_slices(sepsis, hospital, name):
    text = {**SEPSIS, **HOSPITAL}[name] + "matcher: zstream\n"
    events = sepsis if name in SEPSIS else hospital
    pattern = pattern_text(text)
    expected = keys(all_matches_per_partition(pattern, events))
    assert expected
    from .test_zstream import COMBINATIONS as Z
    for options in Z:
        assert keys(run(pattern, events, options)[0]) == expected, options
