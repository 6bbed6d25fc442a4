"""SQL models run after publish on the night's lake: in dependency order, a failing test
keeps the published table, a model joins windows with room states."""

from deltalake import DeltaTable

from jobs.lake import store as lk

from ..lakes import published_ids


def test_example_4_model_joins_windows_with_room_states(nightly):
    profile = nightly[0]
    t = DeltaTable(lk.Lake(profile.lake).model("paper_ex4_room_state")).to_pyarrow_table()
    got = sorted((r["person"], r["room"], r["state"]) for r in t.to_pylist())
    # the states of the room in the 2 minutes up to arriving; Bob's lab-to-lab is dropped
    assert got == [("Ann", "Cafe", "crowded"), ("Ann", "Home", "lights on"),
                   ("Bob", "Room 101", "empty"), ("Tom", "Room 101", "meeting")]
    passes = DeltaTable(lk.Lake(profile.lake).model("lab_to_home_passes")).to_pyarrow_table()
    assert sorted((r["person"], r["step"], r["location"]) for r in passes.to_pylist()) == [
        ("Ann", 1, "Cafe"), ("Tom", 1, "Room 101"), ("Tom", 2, "Corridor")]
    episodes = DeltaTable(lk.Lake(profile.lake).model("sepsis_episodes")).to_pyarrow_table()
    assert episodes.num_rows == len(published_ids(profile, "sepsis_er_episode"))
    assert sum(episodes.column("lab_tests").to_pylist()) > 0


def test_models_run_in_dependency_order_and_a_failing_test_keeps_the_table(spark, nightly,
                                                                           tmp_path,
                                                                           monkeypatch):
    from jobs.pipeline.publish import models as model_step
    from jobs.pipeline.publish.models import run_models
    from jobs.pipeline.validate import gx

    profile = nightly[0]
    lake = lk.Lake(profile.lake)
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "b_top.sql").write_text("SELECT person, n FROM models_a_counts WHERE n > 1")
    (folder / "a_counts.sql").write_text(
        "SELECT person, count(*) AS n FROM matches_paper_ex5_lab_to_home GROUP BY person")
    (folder / "a_counts.yaml").write_text("tests:\n  - unique: [person]\n"
                                          "  - row_count: {min: 1, max: 10}\n")
    log = []
    rows = run_models(spark, lake, folder=folder, echo=log.append)
    assert [(r["model"], r["status"]) for r in rows] == [("a_counts", "success"), ("b_top", "success")]
    top = DeltaTable(lake.model("b_top")).to_pyarrow_table().to_pylist()
    assert top == [{"person": "Ann", "n": 2}]
    before = DeltaTable(lake.model("a_counts")).version()
    (folder / "a_counts.sql").write_text(
        "SELECT person, 1 AS n FROM matches_paper_ex5_lab_to_home")  # Ann twice: not unique
    rows = run_models(spark, lake, folder=folder, echo=log.append)
    assert [(r["model"], r["status"]) for r in rows] == [("a_counts", "failed"),
                                                         ("b_top", "skipped")]
    assert "expect_column_values_to_be_unique(person)" in rows[0]["message"]
    assert DeltaTable(lake.model("a_counts")).version() == before
    # the same tests on GX's Spark engine (a model too large for the driver), then on the
    # driver's again with a new process's GX context: the same verdicts
    for driver_rows in (-1, 10**6):
        monkeypatch.setattr(model_step, "DRIVER_ROWS", driver_rows)
        gx._CONTEXTS.clear()
        rows = run_models(spark, lake, folder=folder, echo=log.append)
        assert [(r["model"], r["status"]) for r in rows] == [("a_counts", "failed"),
                                                             ("b_top", "skipped")]
        assert "expect_column_values_to_be_unique(person)" in rows[0]["message"], rows
    assert DeltaTable(lake.model("a_counts")).version() == before


class NoSpark:
    """Stands for a session that must not be used: any use is recorded and fails."""

    def __init__(self):
        self.used = []

    def __getattr__(self, name):
        self.used.append(name)
        raise AssertionError(f"Spark used: {name}")


def test_a_model_whose_inputs_did_not_change_is_not_rewritten(spark, nightly, tmp_path):
    from jobs.pipeline.publish.models import run_models

    lake = lk.Lake(nightly[0].lake)
    folder = tmp_path / "models"
    folder.mkdir()
    (folder / "c_counts.sql").write_text(
        "SELECT person, count(*) AS n FROM matches_paper_ex5_lab_to_home GROUP BY person")
    (folder / "d_top.sql").write_text("SELECT person FROM models_c_counts WHERE n > 1")
    log = []
    assert [r["status"] for r in run_models(spark, lake, folder=folder, echo=log.append)] \
        == ["success", "success"]
    versions = {m: DeltaTable(lake.model(m)).version() for m in ("c_counts", "d_top")}
    idle = NoSpark()  # nothing they read changed: no Spark, no write
    rows = run_models(idle, lake, folder=folder, echo=log.append)
    assert [(r["model"], r["status"], r.get("unchanged")) for r in rows] == [
        ("c_counts", "success", True), ("d_top", "success", True)]
    assert rows[0]["rows"] == 2 and not idle.used
    assert {m: DeltaTable(lake.model(m)).version() for m in versions} == versions
    assert "model d_top: 1 row(s), unchanged (its inputs did not change)" in log
    # a changed model file is built again, and so is the model that reads it
    (folder / "c_counts.sql").write_text(
        "SELECT person, count(*) + 0 AS n FROM matches_paper_ex5_lab_to_home GROUP BY person")
    rows = run_models(spark, lake, folder=folder, echo=log.append)
    assert [r.get("unchanged") for r in rows] == [None, None]
    assert {m: DeltaTable(lake.model(m)).version() for m in versions} == {
        m: v + 1 for m, v in versions.items()}
