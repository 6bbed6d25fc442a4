"""The Delta side of the pipeline on an object store: an S3-compatible server (moto, in
server mode on 127.0.0.1) reached through delta-rs storage options and pyarrow's S3
filesystem. Spark's side of an ``s3a://`` lake needs the hadoop-aws jars, which this
machine cannot download: that the profile fails fast, and with which settings, is
tested here too."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from jobs.config import ConfigError, load_profile, load_sources
from jobs.lake import store as lk
from jobs.lake.store import Lake
from jobs.pipeline.ingest import ingest
from jobs.pipeline.match.horizons import RunRange
from jobs.spark.session import DAEMON, DEBUG_FRAMES

from ..conftest import ROOT, make_profile

KEY = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
       "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
       "AWS_S3_ALLOW_UNSAFE_RENAME": "true"}  # one writer at a time: the lake lock


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3():
    """A moto S3 server on 127.0.0.1; yields the delta-rs storage options that reach it."""
    port = _free_port()
    server = Path(sys.executable).with_name("moto_server")
    proc = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"moto_server did not start on port {port}") from None
            time.sleep(0.2)
    try:
        yield dict(KEY, AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _bucket(options: dict) -> str:
    import boto3

    name = f"lake-{uuid.uuid4().hex[:12]}"
    boto3.client("s3", endpoint_url=options["AWS_ENDPOINT_URL"], region_name="us-east-1",
                 aws_access_key_id="testing", aws_secret_access_key="testing"
                 ).create_bucket(Bucket=name)
    return name


@pytest.fixture
def s3_lake(s3) -> lk.Lake:
    return lk.Lake.of(f"s3://{_bucket(s3)}/lake", s3)


def _sorted(t: pa.Table, drop=("ingested_at", "ingest_run")) -> list[dict]:
    t = t.drop_columns([c for c in drop if c in t.column_names])
    return sorted(t.to_pylist(), key=lambda r: json.dumps(r, default=str, sort_keys=True))


def test_the_profile_carries_storage_options_from_the_environment(tmp_path, monkeypatch):
    conf = tmp_path / "pipeline.yaml"
    conf.write_text("profiles:\n  s3:\n    landing: s3://b/landing\n    lake: s3a://b/lake\n"
                    "    storage_options:\n      AWS_ENDPOINT_URL: http://127.0.0.1:9\n"
                    "      AWS_SECRET_ACCESS_KEY: ${SES_TEST_SECRET}\n")
    monkeypatch.setenv("SES_TEST_SECRET", "s3cr3t")
    profile = load_profile("s3", conf)
    store = Lake.of_profile(profile)
    assert store.root == "s3a://b/lake" and not store.local
    assert store.storage_options == {"AWS_ENDPOINT_URL": "http://127.0.0.1:9",
                                     "AWS_SECRET_ACCESS_KEY": "s3cr3t"}
    monkeypatch.delenv("SES_TEST_SECRET")
    with pytest.raises(ConfigError, match=r"storage_options.AWS_SECRET_ACCESS_KEY: the "
                                          r"environment variable SES_TEST_SECRET is not set"):
        load_profile("s3", conf)


def test_ingest_into_an_object_store_lake_equals_a_local_one(s3_lake, tmp_path):
    source = load_sources()["sepsis"]
    landing = str(ROOT / "data" / "landing")
    local = lk.Lake(str(tmp_path / "lake"))
    now = datetime(2026, 11, 1, tzinfo=timezone.utc)
    for lake in (s3_lake, local):
        first = ingest(source, landing, lake, "run1", now=now)
        assert first.new_events > 0
    got = s3_lake.read_arrow(s3_lake.events("sepsis"))
    assert _sorted(got) == _sorted(local.read_arrow(local.events("sepsis")))
    assert s3_lake.count_rows(s3_lake.events("sepsis")) == got.num_rows
    again = ingest(source, landing, s3_lake, "run2", now=now)  # the ingest log is on S3 too
    assert (again.files, again.new_events) == (0, 0)
    assert s3_lake.table(s3_lake.events("sepsis")).version() == \
        local.table(local.events("sepsis")).version()


def test_check_frames_of_an_object_store_lake_equal_a_local_ones(s3_lake, tmp_path):
    """The matches suite's check frames of a small night are computed on the driver from
    the bucket (staged Parquet through pyarrow's S3 filesystem, events through delta-rs),
    equal to a local lake's, and every check holds for the engine's own matches."""
    from jobs.core.language.events import events_from_arrow, to_datetime
    from jobs.core.language.patternfile import load_pattern
    from jobs.core.local.runner import run
    from jobs.pipeline.validate.check_frames import DriverFrames, StagedMatches

    source = load_sources()["sepsis"]
    local = lk.Lake(str(tmp_path / "lake"))
    now = datetime(2026, 11, 1, tzinfo=timezone.utc)
    for lake in (s3_lake, local):
        ingest(source, str(ROOT / "data" / "landing"), lake, "run1", now=now)
    pattern = load_pattern(ROOT / "patterns" / "sepsis_labs_then_antibiotics.yaml")
    found = run(pattern, events_from_arrow(local.read_arrow(local.events("sepsis"))))[0]
    staged = pa.Table.from_pylist([
        {"kind": "match", "match_id": f"m{i}", "start_ts": to_datetime(m.start.ts),
         "end_ts": to_datetime(m.end.ts), "n_events": len(m.events),
         "bindings": json.dumps({v: [e.id for e in es] for v, es in m.bindings})}
        for i, m in enumerate(found)])
    frames = []
    for lake in (s3_lake, local):
        fs, folder = lake.filesystem(lake.staging(pattern.name, "r1"))
        fs.create_dir(folder, recursive=True)
        with fs.open_output_stream(f"{folder}/part-0.parquet") as f:
            pq.write_table(staged, f, coerce_timestamps="us")
        run_ = StagedMatches(pattern, "r1", None, None, staged.num_rows)
        frames.append(DriverFrames(lake, [run_]).frame(run_).sort_by("match_id"))
    assert frames[0].equals(frames[1]) and frames[0].num_rows == len(found) > 100
    for flag in ("times_ok", "events_found_ok", "distinct_events_ok", "set_order_ok",
                 "partition_ok"):
        assert all(frames[0].column(flag).to_pylist()), flag


def test_publish_to_an_object_store_lake(spark, s3_lake, tmp_path):
    """The executors write the match table's files into the bucket (pyarrow's S3
    filesystem with the lake's options, shipped in the task), the driver commits."""
    from jobs.pipeline.publish.matches import publish

    from ..pipeline.test_publish import DAY, EPOCH_NS, PATTERN, _staged

    staging = tmp_path / "staging"
    staging.mkdir()
    pq.write_table(_staged([1, 2, 3, 5, 8]), staging / "part-0.parquet")
    rng = RunRange(None, 30 * DAY + EPOCH_NS, True)
    local = lk.Lake(str(tmp_path / "lake"))
    row = {"run_id": "r1", "pattern": PATTERN.name}
    got = publish(spark, s3_lake, PATTERN, "r1", str(staging), rng, run_row=row)
    want = publish(spark, local, PATTERN, "r1", str(staging), rng, run_row=row)
    assert got == want == {"inserted": 5, "deleted": 0, "published": 5,
                           "committed": True}
    path = s3_lake.matches(PATTERN.name)
    table = s3_lake.table(path)
    assert all(u.startswith("s3://") for u in table.file_uris())
    assert _sorted(table.to_pyarrow_table(), drop=()) == \
        _sorted(local.read_arrow(local.matches(PATTERN.name)), drop=())
    commit = table.history(1)[0]
    assert json.loads(commit["ses.run"]) == row and commit["ses.inserted"] == "5"
    assert s3_lake.children(s3_lake.matches()) == [PATTERN.name]


def test_runs_log_and_reconcile_on_an_object_store_lake(s3_lake):
    """The run plan file, the staged folders and the runs log live in the bucket, and the
    next run's repair finds them there."""
    from jobs.lake.runs import log_run, previous_runs
    from jobs.pipeline.upkeep.reconcile import reconcile, start_run
    from jobs.status import ABORTED, SUCCESS

    now = datetime.now(timezone.utc)
    log_run(s3_lake, {"run_id": "r0", "pattern": "done", "status": SUCCESS, "started_at": now,
                      "finished_at": now, "matches": 3})
    start_run(s3_lake, "r1", "2026-11-01", [{"pattern": "cut_short", "pattern_version": "v",
                                             "source": "s", "matcher": "ses"}])
    s3_lake.write_text(s3_lake.staging("done", "r0") + "/_stats.json", "{}")
    s3_lake.write_text(s3_lake.staging("cut_short", "r1") + "/_temporary/0/part", "x")
    s3_lake.write_text(s3_lake.staging("cut_short", "r1") + "/part-0.parquet", "x")
    assert s3_lake.children(s3_lake.run_plans(), files=True) == ["r1.json"]
    notes = reconcile(s3_lake, echo=lambda *_: None)
    assert notes == ["reconciled: cut_short of run r1 was interrupted; logged as aborted"]
    assert s3_lake.children(s3_lake.run_plans(), files=True) == []
    rows = previous_runs(s3_lake, "cut_short")
    assert [(r["run_id"], r["status"]) for r in rows] == [("r1", ABORTED)]
    assert previous_runs(s3_lake, "done")[0]["matches"] == 3
    # the aborted run's staging went, the finished run's staging went
    assert s3_lake.children(s3_lake.staging("done")) == []
    assert s3_lake.children(s3_lake.staging("cut_short")) == []
    assert reconcile(s3_lake, echo=lambda *_: None) == []  # nothing left to repair


def test_statistics_on_an_object_store_lake(s3_lake):
    from jobs.lake.stats import SCHEMA, computed_dates, write_stats
    from jobs.pipeline.match.planning import read_date_stats

    def rows(date: str, events: int, at: datetime) -> pa.Table:
        day = datetime.fromisoformat(date).replace(tzinfo=timezone.utc)
        return pa.Table.from_pylist([
            {"event_date": date, "attribute": "*", "value": "*,crp", "events": events,
             "first_ts": day, "last_ts": day + timedelta(hours=20), "computed_at": at},
            {"event_date": date, "attribute": "crp", "events": events,
             "quantiles": [1.0, 2.0, 3.0], "computed_at": at}], schema=SCHEMA)

    t0 = datetime(2026, 11, 1, tzinfo=timezone.utc)
    write_stats(s3_lake, "sepsis", pa.concat_tables([rows("2020-01-01", 10, t0),
                                                     rows("2020-01-02", 20, t0)]),
                ["2020-01-01", "2020-01-02"])
    write_stats(s3_lake, "sepsis", rows("2020-01-02", 25, t0 + timedelta(days=1)),
                ["2020-01-02"])  # the late events of one date: only it is replaced
    done = computed_dates(s3_lake, "sepsis")
    assert sorted(done) == ["2020-01-01", "2020-01-02"]
    assert done["2020-01-01"][0] == {"*", "crp"}
    assert done["2020-01-02"][1] > done["2020-01-01"][1]
    st = read_date_stats(s3_lake, "sepsis", None, None, 0)
    assert st.total == 35


def test_query_lists_and_reads_the_tables_of_an_object_store_lake(s3_lake):
    from jobs.lake.runs import log_run
    from jobs.lake.views import duckdb_connection, lake_tables
    from jobs.status import SUCCESS

    now = datetime.now(timezone.utc)
    for i in range(3):
        log_run(s3_lake, {"run_id": f"r{i}", "pattern": "p", "status": SUCCESS,
                          "started_at": now, "finished_at": now})
    s3_lake.append(s3_lake.events("toy"), pa.table({"event_id": ["a", "b"]}))
    assert lake_tables(s3_lake) == {"events_toy": s3_lake.events("toy"),
                                    "runs": s3_lake.runs()}
    con, views = duckdb_connection(s3_lake, "select count(*) from runs")
    assert con.execute("select count(*) from runs").fetchone() == (3,)


def test_spark_without_s3a_fails_fast_and_names_the_jars_and_settings(spark, s3, tmp_path):
    from dataclasses import replace

    from jobs.spark.session import (
        ObjectStoreUnsupported,
        require_object_store,
        session_conf,
        submit_command,
    )

    profile = replace(make_profile(tmp_path), lake="s3a://bucket/lake",
                      storage_options=dict(s3))
    with pytest.raises(ObjectStoreUnsupported) as info:
        require_object_store(spark, profile)
    message = str(info.value)
    for part in ("org.apache.hadoop.fs.s3a.S3AFileSystem", "hadoop-aws-3.5.0.jar",
                 "software.amazon.awssdk:bundle", "spark.jars", "storage_options"):
        assert part in message, part
    conf = session_conf(profile)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == s3["AWS_ENDPOINT_URL"]
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.access.key"] == "testing"
    assert conf["spark.sql.session.timeZone"] == "UTC"  # the profile's own settings stay
    command = " ".join(submit_command(profile, "spark-submit", "entry.py", []))
    assert "fs.s3a.endpoint=" in command and "secret.key" not in command
    local = make_profile(tmp_path)
    require_object_store(spark, local)  # a local lake needs nothing
    assert session_conf(local) == {DEBUG_FRAMES: "false", DAEMON: "jobs.spark.daemon",
                                   **local.spark_conf}


def test_object_store_paths_never_touch_the_local_disk(s3_lake, tmp_path, monkeypatch):
    """What belongs to the lake but is no table (locks, GX docs, the site) goes to the
    lake's folder on this machine, never to a folder named after the URI."""
    from jobs.lake.locks import lock_folder
    from jobs.site.build import site_folder

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    home = s3_lake.local_home()
    assert home.is_relative_to(tmp_path / "home" / ".cache" / "ses-lakehouse")
    assert site_folder(s3_lake) == home / "site"
    assert lock_folder(s3_lake.root).parent == home
    assert not (tmp_path / "s3:").exists() and os.listdir(tmp_path) == ["home"]


def test_an_unreachable_store_is_one_line_naming_the_request(tmp_path, monkeypatch, capsys):
    from jobs.cli.main import main

    port = _free_port()  # nothing listens there
    conf = tmp_path / "pipeline.yaml"
    conf.write_text("profiles:\n  s3:\n    landing: s3://b/landing\n    lake: s3://b/lake\n"
                    "    storage_options:\n"
                    + "".join(f"      {k}: '{v}'\n" for k, v in KEY.items())
                    + f"      AWS_ENDPOINT_URL: http://127.0.0.1:{port}\n")
    monkeypatch.setenv("SES_PIPELINE_CONF", str(conf))
    assert main(["runs", "--profile", "s3"]) == 75  # a storage error: transient, retried
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "\x1b" not in err
    assert f"GET http://127.0.0.1:{port}/b/lake/runs/_delta_log/" in err and "Connection refused" in err
    assert "check the profile's storage_options" in err


def test_query_and_runs_commands_on_an_object_store_lake(s3_lake, tmp_path, monkeypatch,
                                                           capsys):
    """The analyst's commands that need no Spark work on a bucket as on a folder."""
    from jobs.cli.main import main
    from jobs.lake.runs import log_run
    from jobs.status import SUCCESS

    now = datetime.now(timezone.utc)
    log_run(s3_lake, {"run_id": "r7", "pattern": "p", "status": SUCCESS, "matches": 4,
                      "started_at": now, "finished_at": now})
    conf = tmp_path / "pipeline.yaml"
    conf.write_text(f"profiles:\n  s3:\n    landing: {tmp_path}\n    lake: {s3_lake.root}\n"
                    "    storage_options:\n"
                    + "".join(f"      {k}: '{v}'\n" for k, v in s3_lake.options))
    monkeypatch.setenv("SES_PIPELINE_CONF", str(conf))
    assert main(["query", "--profile", "s3"]) == 0
    assert "tables: runs" in capsys.readouterr().out
    assert main(["query", "--profile", "s3", "--format", "csv",
                 "SELECT run_id, matches FROM runs"]) == 0
    assert capsys.readouterr().out.splitlines() == ["run_id,matches", "r7,4"]
    assert main(["runs", "--profile", "s3"]) == 0
    assert "r7" in capsys.readouterr().out
