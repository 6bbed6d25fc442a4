"""Spark reads of the files the pipeline writes itself take their schema from the files'
footer on the driver (no schema-inference job): the same schema and rows as Spark's own
inference, for files Spark's executors wrote and files Arrow wrote."""

from datetime import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.lake import store as lk
from jobs.spark.tables import read_parquet_spark, spark_uri


def _same(spark, lake: lk.Lake, folder: str):
    ours, inferred = read_parquet_spark(spark, lake, folder), spark.read.parquet(spark_uri(folder))
    assert ours.schema == inferred.schema
    assert sorted(map(tuple, ours.collect())) == sorted(map(tuple, inferred.collect()))
    return ours


def test_staged_files_are_read_with_their_footers_schema(spark, tmp_path):
    lake = lk.Lake(str(tmp_path / "lake"))
    by_spark = str(tmp_path / "spark-staged")
    spark.createDataFrame(
        [("match", "m1", 1, datetime(2026, 1, 2, 3, 4, 5), 3, '{"a": ["e1"]}', 1.5),
         ("stats", None, None, None, 0, None, None)],
        "kind string, match_id string, alternative int, start_ts timestamp, n_events long, "
        "bindings string, score double").write.parquet(by_spark)
    assert _same(spark, lake, by_spark).count() == 2
    by_arrow = tmp_path / "arrow-staged"
    by_arrow.mkdir()
    pq.write_table(pa.table({"kind": ["match"], "start_ts": pa.array(
        [datetime(2026, 1, 2)], pa.timestamp("us", "UTC")), "n": pa.array([7], pa.int32())}),
        by_arrow / "part-0.parquet")
    _same(spark, lake, str(by_arrow))


def test_a_folder_without_files_or_with_a_type_spark_lacks_is_spark_s_own_error(spark, tmp_path):
    lake = lk.Lake(str(tmp_path / "lake"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(Exception, match="(?i)infer schema|UNABLE_TO_INFER"):
        read_parquet_spark(spark, lake, str(tmp_path / "empty"))
    nanos = tmp_path / "nanos"
    nanos.mkdir()
    pq.write_table(pa.table({"ts": pa.array([datetime(2026, 1, 2)], pa.timestamp("ns"))}),
                   nanos / "part-0.parquet")
    with pytest.raises(Exception, match="PARQUET_TYPE_ILLEGAL"):  # when read, as Spark says
        read_parquet_spark(spark, lake, str(nanos))
