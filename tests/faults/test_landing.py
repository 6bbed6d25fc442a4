"""What may be read, and inputs that cost only themselves: links, devices and FIFOs among the
landing, pattern and model files are refused and named without being opened; an over-long
field or line is quarantined and the rest of its file ingested; hostile generated files
never end in a traceback; logical dates are checked. No Spark."""

import json
import os
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jobs.cli.main import main
from jobs.config import TimeRange, load_profile, load_sources
from jobs.core.language.patternfile import PatternError, load_pattern
from jobs.lake.store import Lake
from jobs.landing import reading
from jobs.pipeline import ingest as ig
from jobs.pipeline.match.horizons import check_logical_date
from jobs.project.models import ModelError, load_model
from jobs.project.patterns import load_catalog

from ..conftest import ROOT
from .conftest import P1

CHEMO = load_sources()["chemo_mw"]
HOSPITAL = load_sources()["hospital"]
HEADER = "event_id,patient,type,value,unit,ts\n"


def _landing(tmp_path: Path, source: str = "chemo_mw") -> Path:
    folder = tmp_path / "landing" / source
    folder.mkdir(parents=True)
    return folder


def _stage(tmp_path, source=CHEMO):
    return ig.stage(source, str(tmp_path / "landing"), Lake(str(tmp_path / "lake")), "r")


def test_links_and_fifos_in_a_landing_folder_are_refused_unopened(tmp_path):
    folder = _landing(tmp_path)
    (folder / "ok.csv").write_text(HEADER + "e1,1,C,1,mg,2010-08-01T00:00:00\n")
    (folder / "passwd.csv").symlink_to("/etc/passwd")
    with pytest.raises(ig.IngestError) as info:
        _stage(tmp_path)
    msg = str(info.value)
    assert "passwd.csv: is a symbolic link (to '/etc/passwd')" in msg and "root:" not in msg
    (folder / "passwd.csv").unlink()
    (tmp_path / "elsewhere").mkdir()
    (folder / "sub").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(ig.IngestError, match="sub: is a symbolic link"):
        _stage(tmp_path)
    (folder / "sub").unlink()
    os.mkfifo(folder / "pipe.csv")  # opening it would block for ever
    with pytest.raises(ig.IngestError, match="pipe.csv: is a FIFO"):
        _stage(tmp_path)
    (folder / "pipe.csv").unlink()
    (folder / "notes.txt").write_text("not a landing file")  # other suffixes: ignored
    assert _stage(tmp_path).events.num_rows == 1


def test_a_linked_pattern_or_model_file_is_refused(tmp_path):
    folder = tmp_path / "patterns"
    folder.mkdir()
    (folder / "p1.yaml").write_text(Path(P1).read_text())
    (folder / "again.yaml").symlink_to(folder / "p1.yaml")
    catalog = load_catalog(folder=folder)
    assert [p.name for _, p in catalog.patterns] == ["mw_chemo_p1"]
    [rejected] = catalog.rejected
    assert rejected.path.name == "again.yaml" and "symbolic link" in rejected.problems[0].message
    with pytest.raises(PatternError, match="is a symbolic link"):
        load_pattern(folder / "again.yaml")
    models = tmp_path / "models"
    models.mkdir()
    (models / "real.sql").write_text("SELECT 1 AS x")
    (models / "linked.sql").symlink_to(models / "real.sql")
    with pytest.raises(ModelError, match="linked.sql: the file is a symbolic link"):
        load_model(models / "linked.sql")


def test_an_over_long_field_or_line_is_quarantined_and_the_rest_ingested(tmp_path, monkeypatch):
    folder = _landing(tmp_path)
    huge = "x" * 200_000  # over the csv module's own limit (131,072), which failed the file
    (folder / "a.csv").write_text(HEADER + f"e1,1,C,1,{huge},2010-08-01T00:00:00\n"
                                  "e2,1,C,1,mg,2010-08-02T00:00:00\n")
    batch = _stage(tmp_path)
    assert batch.events.column("event_id").to_pylist() == ["e2"]
    [q] = [r for t in batch.quarantine for r in t.to_pylist()]
    assert "200,000 characters, over the limit" in q["reason"] and len(q["raw"]) < 2_100
    monkeypatch.setattr(reading, "MAX_LINE", 1_000)
    sepsis = _landing(tmp_path, "sepsis")
    good = dict(dict.fromkeys(load_sources()["sepsis"].columns), patient="A",
                event_type="ER Registration", timestamp="2014-01-01T00:00:00")
    (sepsis / "s.jsonl").write_text(json.dumps(dict(good, resource="x" * 2_000)) + "\n"
                                    + json.dumps(good) + "\n")
    batch = ig.stage(load_sources()["sepsis"], str(tmp_path / "landing"),
                     Lake(str(tmp_path / "lake")), "r")
    assert batch.events.num_rows == 1
    [q] = [r for t in batch.quarantine for r in t.to_pylist()]
    assert q["line"] == 1 and "over the limit of 1,000" in q["reason"]


def test_a_csv_row_with_a_field_missing_or_too_many_is_quarantined_as_such(tmp_path):
    """A short row used to be typed with its fields shifted into the wrong columns (here
    the time in ``unit``) and quarantined for an empty time, or, had the missing field been
    an optional last column, ingested with a null. Either way it is the row's shape that
    is wrong, and the reason now says so."""
    folder = _landing(tmp_path)
    (folder / "a.csv").write_text(HEADER + "e1,1,C,1,mg,2010-08-01T00:00:00\n"
                                  "e2,1,C,1,2010-08-02T00:00:00\n"
                                  "\n"
                                  "e3,1,C,1,mg,2010-08-03T00:00:00,extra\n")
    batch = _stage(tmp_path)
    assert batch.events.column("event_id").to_pylist() == ["e1"]
    rows = sorted((r["line"], r["reason"], r["raw"]) for t in batch.quarantine
                  for r in t.to_pylist())
    shape = "field(s) where the header names 6: which value belongs to which column cannot be known"
    assert rows == [(3, f"5 {shape}", '["e2", "1", "C", "1", "2010-08-02T00:00:00"]'),
                    (5, f"7 {shape}", '["e3", "1", "C", "1", "mg", "2010-08-03T00:00:00", '
                                      '"extra"]')]


def test_a_key_written_twice_quarantines_its_record_or_fails_its_file(tmp_path):
    """``json.loads`` keeps the last of two equal keys: a JSON record that gives ``patient``
    twice is quarantined, not ingested with one of them; a value that only looks like a
    key's end (``"a":``) is not mistaken for one. A Parquet file naming a column twice
    fails alone, as a CSV header does."""
    sepsis_source = load_sources()["sepsis"]
    sepsis = _landing(tmp_path, "sepsis")
    good = dict(dict.fromkeys(sepsis_source.columns), patient="A",
                event_type="ER Registration", timestamp="2014-01-01T00:00:00")
    doubled = json.dumps(dict(good, patient="A"))[:-1] + ', "patient": "B"}'
    tricky = json.dumps(dict(good, patient="C", event_type='ER "x": Triage'))
    nested = json.dumps(dict(good, patient="D"))[:-1] + ', "extra": {"k": 1, "k": 2}}'

    (sepsis / "s.jsonl").write_text("\n".join([doubled, tricky, nested, json.dumps(good)]) + "\n")
    batch = ig.stage(sepsis_source, str(tmp_path / "landing"), Lake(str(tmp_path / "lake")), "r")
    assert sorted(batch.events.column("patient").to_pylist()) == ["A", "C"]
    quarantined = sorted((r["line"], r["reason"]) for t in batch.quarantine for r in t.to_pylist())
    assert quarantined[0] == (1, "key 'patient' appears twice in the record: which value is "
                                 "meant cannot be known")
    assert quarantined[1] == (3, "key 'k' appears twice in the record: which value is "
                                 "meant cannot be known")

    table = pa.table([["e1"], ["1"], ["C"], [1.0], ["mg"], ["2010-08-01T00:00:00"], ["2"]],
                     names=["event_id", "patient", "type", "value", "unit", "ts", "patient"])
    pq.write_table(table, tmp_path / "a.parquet")
    with pytest.raises(ig.IngestError, match=r"a.parquet: the file names column\(s\) 'patient' "
                                             "more than once"):
        list(ig.read_raw(tmp_path / "a.parquet", "parquet"))


def test_errors_quote_only_a_short_escaped_excerpt(tmp_path):
    folder = _landing(tmp_path)
    (folder / "a.csv").write_text("root:x:0:0:root:/root:/bin/bash" + "".join(f",y{i}" for i in range(200))
                                  + "\nq\n")
    with pytest.raises(ig.IngestError) as info:
        _stage(tmp_path)
    assert len(str(info.value)) < 400 and "'root:x:0:0" in str(info.value)
    (folder / "a.csv").write_text("event_id,ts,ts\ne1,2010-08-01,2010-08-02\n")
    with pytest.raises(ig.IngestError, match="names column.*'ts'.*more than once"):
        _stage(tmp_path)


FIELD = st.text(st.sampled_from("ab,\"\n\r\x00\ufeff é;"), max_size=8)


@given(rows=st.lists(st.lists(FIELD, min_size=0, max_size=8), max_size=12),
       bom=st.booleans(), crlf=st.booleans(), raw=st.binary(max_size=40))
def test_generated_landing_files_never_end_in_a_traceback(tmp_path_factory, rows, bom, crlf,
                                                          raw):
    """Hostile text (NUL, BOM, quotes, ragged rows, line ends inside fields) and random
    bytes: the file is refused in one line, or every row is an event, a duplicate or a
    quarantined row with its reason."""
    tmp = tmp_path_factory.mktemp("gen")
    folder = _landing(tmp, "hospital")
    end = "\r\n" if crlf else "\n"
    good = ",".join({"patient": "p", "event_type": "t", "timestamp": "2006-01-01"}.get(c, "")
                    for c in HOSPITAL.columns)
    lines = [",".join(HOSPITAL.columns), good] + [",".join(r) for r in rows] + [good]
    text = ("\ufeff" if bom else "") + end.join(lines) + end
    (folder / "a.csv").write_bytes(text.encode("utf-8"))
    (folder / "b.csv").write_bytes(raw)
    for files in (["a.csv"], ["b.csv"]):
        for f in folder.iterdir():
            f.rename(f.with_suffix(".csv" if f.name in files else ".off"))
        try:
            batch = _stage(tmp, HOSPITAL)
        except ig.IngestError as exc:
            assert "\n" not in str(exc) and len(str(exc)) < 600
            continue
        quarantined = [r for t in batch.quarantine for r in t.to_pylist()]
        assert all(r["reason"] for r in quarantined)
        result = batch.result
        assert result.rows == batch.events.num_rows + len(quarantined) + result.duplicates
        if files == ["a.csv"]:
            assert batch.events.num_rows >= 1  # the good rows: an identical pair, two events


def test_logical_dates_are_checked(capsys):
    profile = load_profile("local", ROOT / "conf" / "pipeline.yaml")
    now = datetime(2026, 11, 26, 12, tzinfo=timezone.utc)
    assert check_logical_date(profile, "2026-11-27", now) == "2026-11-27"  # max_future 1d
    assert check_logical_date(profile, None, now) == "2026-11-26"
    with pytest.raises(ValueError, match="after today .* plus the allowed future"):
        check_logical_date(profile, "2026-11-28", now)
    with pytest.raises(ValueError, match="before ingest.earliest"):
        check_logical_date(profile, "1899-12-31", now)
    with pytest.raises(ValueError, match="is not a date"):
        check_logical_date(profile, "26/11/2026", now)
    assert main(["run", "--logical-date", "2099-01-01"]) == 2  # before Spark starts
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "logical date 2099-01-01 is after today" in err[0]


def test_a_file_cut_short_after_it_was_listed_fails_its_source_named(tmp_path):
    """A landing file replaced by a shorter one between the listing and its task: the task
    stops with the file and what happened (it used to wait for bytes that never came)."""
    from jobs.landing.files import typed_blocks
    from jobs.landing.splits import splits_of

    path = tmp_path / "a.csv"
    path.write_text(HEADER + "e1,1,C,1,mg,2010-08-01T00:00:00\ne2,1,C,1,mg,2010-08-02T00:00:00\n")
    source = load_sources()["chemo_mw"]
    [split] = splits_of(path, "csv", source.time_column, 0, "a.csv", 0, "r",
                        datetime.now(timezone.utc))
    path.write_text(HEADER + "e1,1,C,1,mg,2010-08-01T00:00:00\n")
    with pytest.raises(ig.IngestError, match=r"a\.csv: cannot be read as csv: the file ends "
                                             r"\d+ bytes before byte \d+.*changed while being "
                                             "ingested"):
        list(typed_blocks(split, source, TimeRange()))
