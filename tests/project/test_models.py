"""SQL model files without Spark: dependencies, order, and the messages of mistakes."""

import pytest

from jobs.project.models import ModelError, expectations, load_models


def write(folder, name, sql, meta=None):
    (folder / f"{name}.sql").write_text(sql)
    if meta is not None:
        (folder / f"{name}.yaml").write_text(meta)


def test_the_committed_models_and_their_order():
    models = load_models()
    assert [m.name for m in models] == ["lab_to_home_passes", "paper_ex4_room_state",
                                        "sepsis_episodes"]
    ex4 = next(m for m in models if m.name == "paper_ex4_room_state")
    assert ex4.tables == ("matches_paper_ex4_next_room", "reference_room_state")
    assert {e["type"] for e in expectations(ex4)} == {
        "expect_column_values_to_not_be_null", "expect_compound_columns_to_be_unique",
        "expect_column_values_to_be_in_set", "expect_table_row_count_to_be_between"}


def test_dependencies_come_from_the_sql_and_the_sidecar(tmp_path):
    write(tmp_path, "c", "SELECT * FROM models_b -- not models_x", "depends_on: [a]\n")
    write(tmp_path, "b", "SELECT 'models_zzz' AS t, * FROM models_a")
    write(tmp_path, "a", "SELECT 1 AS x")
    models = load_models(tmp_path)
    assert [m.name for m in models] == ["a", "b", "c"]
    assert models[2].depends_on == ("b", "a")
    assert [m.name for m in load_models(tmp_path, select=["c"])] == ["c"]


@pytest.mark.parametrize("files, message", [
    ({"a": ("SELECT * FROM models_b", None), "b": ("SELECT * FROM models_a", None)}, "cycle"),
    ({"a": ("SELECT * FROM models_nope", None)}, "depends on model 'nope'"),
    ({"a": ("SELECT 1; DROP TABLE x", None)}, "one query per model"),
    ({"a": ("SELECT 1", "tests:\n  - not_nul: [x]\n")}, "test 1 must be one of"),
    ({"a": ("SELECT 1", "tests:\n  - accepted_values: [x]\n")}, "{column: c, values"),
    ({"a": ("SELECT 1", "owner: me\n")}, "unknown key(s) ['owner']"),
    ({"a": ("SELECT 1", "tests:\n  - not_null: [x]\ntests:\n  - unique: [x]\n")},
     "a.yaml:3: key 'tests' appears twice in the file (first on line 1)"),
])
def test_mistakes_in_model_files_are_named(tmp_path, files, message):
    for name, (sql, meta) in files.items():
        write(tmp_path, name, sql, meta)
    with pytest.raises(ModelError) as exc:
        load_models(tmp_path)
    assert message in str(exc.value)
