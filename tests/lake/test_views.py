"""Which events table a match table's views join: its Delta metadata, else the runs log."""

import pyarrow as pa

from jobs.lake import store as lk
from jobs.lake.views import SOURCE_KEY, lake_tables, match_sources


def test_a_match_table_s_source_comes_from_its_metadata_else_from_the_runs_log(tmp_path):
    lake = lk.Lake.of(str(tmp_path / "lake"))
    lake.append(lake.events("s"), pa.table({"event_id": ["e"]}))
    for name in ("tagged", "old", "elsewhere"):  # "old": written before the tag
        lake.write(lake.matches(name), pa.table({"match_id": ["m"]}))
    lake.table(lake.matches("tagged")).alter.set_table_properties(
        {SOURCE_KEY: "s"}, raise_if_not_exists=False)
    lake.table(lake.matches("elsewhere")).alter.set_table_properties(  # no such events table
        {SOURCE_KEY: "gone"}, raise_if_not_exists=False)
    assert match_sources(lake, lake_tables(lake)) == {"tagged": "s"}
    lake.append(lake.runs(), pa.table({"pattern": ["old", "tagged"], "source": ["s", "x"]}))
    assert match_sources(lake, lake_tables(lake)) == {"tagged": "s", "old": "s"}
