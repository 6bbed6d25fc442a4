"""The published rows' contract: the columns of match tables (sequence, disjunction, window)
and the pattern each table carries in its Delta metadata."""

import pyarrow as pa
from deltalake import DeltaTable

from jobs.core.language.patternfile import load_pattern
from jobs.lake import store as lk


def test_match_row_contract(nightly):
    profile = nightly[0]
    t = DeltaTable(lk.Lake(profile.lake).matches("mw_chemo_p1")).to_pyarrow_table()
    assert t.column_names == ["match_id", "pattern", "pattern_version", "patient", "start_ts",
                              "end_ts", "n_events", "bindings", "run_id"]
    rows = sorted(t.to_pylist(), key=lambda r: r["start_ts"])
    assert dict(rows[0]["bindings"]) == {"c": ["e1"], "p": ["e3", "e9"], "b": ["e11"]}
    assert rows[0]["n_events"] == 4 and rows[0]["patient"] == 1


def test_disjunction_row_contract(nightly):
    profile = nightly[0]
    t = DeltaTable(lk.Lake(profile.lake).matches("sepsis_escalation_either_way")).to_pyarrow_table()
    assert t.column_names == ["match_id", "pattern", "pattern_version", "alternative", "patient",
                              "start_ts", "end_ts", "n_events", "bindings", "run_id"]
    rows = t.to_pylist()
    assert {r["alternative"] for r in rows} == {1, 2}
    assert {frozenset(dict(r["bindings"])) for r in rows} == {frozenset("li"),
                                                                frozenset(("w", "ab", "fl"))}
    assert all(set(dict(r["bindings"])) == set("li") for r in rows if r["alternative"] == 1)


def test_window_row_contract(nightly):
    """A window pattern's table: bindings first/buffer/last and one typed column per
    select value (the local `match` command's `values`)."""
    profile = nightly[0]
    t = DeltaTable(lk.Lake(profile.lake).matches("paper_ex5_lab_to_home")).to_pyarrow_table()
    assert t.schema.field("duration").type == pa.float64()
    assert t.schema.field("steps").type == pa.int64()
    assert t.schema.field("person").type == pa.string()
    rows = sorted(t.to_pylist(), key=lambda r: r["start_ts"])
    assert [(dict(r["bindings"]), r["person"], r["duration"], r["steps"], r["n_events"])
            for r in rows] == [
        ({"first": ["l01"], "buffer": ["l03", "l07"], "last": ["l09"]}, "Tom", 5400.0, 4, 4),
        ({"first": ["l02"], "buffer": ["l04"], "last": ["l06"]}, "Ann", 2100.0, 3, 3),
        ({"first": ["l13"], "buffer": [], "last": ["l14"]}, "Ann", 3600.0, 2, 2)]
    arrived = DeltaTable(lk.Lake(profile.lake).matches("paper_ex4_next_room")).to_pyarrow_table()
    assert arrived.schema.field("arrived").type == pa.timestamp("us", tz="UTC")


def test_match_tables_carry_their_pattern_in_delta_metadata(nightly):
    profile = nightly[0]
    pattern = load_pattern("patterns/sepsis_rising_crp_then_icu.yaml")
    dt = DeltaTable(lk.Lake(profile.lake).matches(pattern.name))
    meta = dt.metadata()
    assert meta.name == pattern.name and meta.description == pattern.description.strip()
    assert meta.configuration["ses.pattern.path"] == "patterns/sepsis_rising_crp_then_icu.yaml"
    assert meta.configuration["ses.pattern.version"] == pattern.version
    assert meta.configuration["ses.pattern.source"] == "sepsis"
    comments = {f.name: (f.metadata or {}).get(b"comment", b"").decode()
                for f in dt.schema().to_arrow()}
    assert all(comments.values()), comments
    assert "partition attribute 'patient'" in comments["patient"]


def test_the_nights_data_docs_show_every_suite_it_ran(nightly):
    """The night's Data Docs (built once, after the models) hold a page for the events
    suite of every source it ingested, the matches suite of every pattern that matched,
    and the model tests."""
    profile, rows, _ = nightly
    home = lk.Lake(profile.lake).local_home()
    pages = home / "gx" / "uncommitted" / "data_docs" / "local_site" / "validations"
    shown = {p.name for p in pages.iterdir() if any(p.rglob("*.html"))}
    matched = {r["pattern"] for r in rows if "pattern" in r and (r["matches"] or 0) > 0}
    assert matched and {f"matches_{p}" for p in matched} <= shown
    assert {"events_hospital", "events_sepsis"} <= shown
    assert any(s.startswith("model_") for s in shown), shown
