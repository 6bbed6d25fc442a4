"""The executors' part of ingest: the splits, packed into tasks of about 64 MB
(``splits.packed``), each read, typed on columns and written as Parquet files of the
run's staging: the typed events and the quarantined rows (``part/<split>.parquet``,
``quarantine/<split>.parquet``; ``info/<split>.parquet.json``: its counts, once both are
in place; ``data/<split>.parquet``: the events as a data file of the table, when they
hold one date, ``DataFile``), and one small row of counts returned per split. A file that
cannot be read is reported in that row, not raised, so that Spark does not retry what
cannot succeed; a task that dies is retried by Spark and writes the same files again
(fixed names, written under a hidden temporary name and moved: what a killed task leaves
is skipped by every reader of the folder), so nothing is doubled.

Without Spark (tests, ``ses match``) the same tasks run one after another in this process.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator

import pyarrow as pa

from jobs import environment
from jobs.config import Source, TimeRange
from jobs.lake import store as lk
from jobs.lake.delta_files import FileStats
from jobs.landing.files import typed_blocks
from jobs.landing.ids import SplitNumbers
from jobs.landing.reading import IngestError, NotPlain, QuoteOpen
from jobs.landing.splits import Split, packed, whole
from jobs.landing.typing import data_schema, events_schema, typed_schema
from jobs.progress import EVERY

# a split's ``INFO`` row, the dict its task returns: split, rows, events, quarantined,
# seconds, read, type, ids (seconds), error (None, or why the file cannot be read) and
# data (its data file's ``load.LOADED`` fields as JSON, or None)
REREAD = "reread: "  # a split cut inside a quoted field: its file is read again, whole


def part(folder: str, kind: str, split: int) -> str:
    """The file of a split's typed events (``kind`` "part") or quarantined rows."""
    return lk.join(folder, kind, f"{split:06d}.parquet")


def _hidden_temp(path: str) -> str:
    """A temporary name beside ``path`` that starts with a dot: Spark, pyarrow's datasets
    and ``staging.batches`` skip it, so a task killed while writing leaves nothing read."""
    folder, name = path.rsplit("/", 1)
    return f"{folder}/.{name}.{uuid.uuid4().hex}.tmp"


def run_split(split: Split, source: Source, ts_range: TimeRange, lake: lk.Lake,
              folder: str, direct: bool = False) -> dict:
    """Read, type and write one split; returns its ``INFO`` row (as a dict). ``direct``:
    its events also go into a data file of the events table while they hold one
    ``event_date`` (``DataFile``)."""
    import pyarrow.parquet as pq

    t0 = time.perf_counter()
    fs, _ = lake.filesystem(folder)
    schema = typed_schema(source)
    targets = {k: lake.filesystem(part(folder, k, split.index))[1]
               for k in ("part", "quarantine", "data")}
    temp = {k: _hidden_temp(v) for k, v in targets.items()}
    for k in ("part", "quarantine", "data"):
        fs.create_dir(lake.filesystem(lk.join(folder, k))[1], recursive=True)
    rows = events = 0
    quarantined: list[pa.Table] = []
    writer = data = None
    clock = {"read": 0.0, "type": 0.0, "ids": 0.0}
    try:
        try:
            for reader in (split, whole(split, split.index)):
                numbers = SplitNumbers() if not source.id_column else None
                data = DataFile(fs, temp["data"], source) if direct else None
                try:
                    for n, ev, q in typed_blocks(reader, source, ts_range, clock):
                        rows += n
                        if numbers is not None:
                            ev = numbers.number(ev)
                        if ev.num_rows:
                            if writer is None:
                                writer = pq.ParquetWriter(temp["part"], schema, filesystem=fs,
                                                          **staged_options(schema))
                            writer.write_table(ev)
                            events += ev.num_rows
                            if data is not None and not data.add(ev):
                                data = None
                        if q.num_rows:
                            quarantined.append(q)
                    break
                except NotPlain:  # a compressed file: Python's readers read it again
                    if writer is not None:
                        writer.close()
                        fs.delete_file(temp["part"])
                    if data is not None:
                        data.drop()
                    writer, rows, events = None, 0, 0
                    quarantined.clear()
        except (IngestError, QuoteOpen) as exc:
            mark = REREAD if isinstance(exc, QuoteOpen) else ""
            return {"split": split.index, "rows": rows, "events": 0, "quarantined": 0,
                    "seconds": time.perf_counter() - t0, **clock, "error": mark + str(exc),
                    "data": None}
        except MemoryError:
            quarantined.clear()
            return {"split": split.index, "rows": rows, "events": 0, "quarantined": 0,
                    "seconds": time.perf_counter() - t0, **clock,
                    "error": f"{split.path}: the ingest of source {source.name!r} ran out of "
                             "memory (a block of its typed rows did not fit); give the "
                             "executors more memory or lower ingest's split size",
                    "data": None}
        finally:
            if writer is not None:
                writer.close()
            if data is not None:
                data.close()
        if writer is not None:
            fs.move(temp["part"], targets["part"])
        written = data.info() if data is not None and data.rows else None
        if written is not None:  # the driver finds it at ``part(folder, "data", split)``
            fs.move(temp["data"], targets["data"])
        q = pa.concat_tables(quarantined) if quarantined else None
        if q is not None:
            pq.write_table(q, temp["quarantine"], filesystem=fs)
            fs.move(temp["quarantine"], targets["quarantine"])
    finally:
        for t in temp.values():
            if fs.get_file_info(t).type != 0:
                fs.delete_file(t)
    info = {"split": split.index, "rows": rows, "events": events,
            "quarantined": q.num_rows if q is not None else 0,
            "seconds": time.perf_counter() - t0, **clock, "error": None,
            "data": json.dumps(written) if written is not None else None}
    lake.write_text(part(folder, "info", split.index) + ".json", json.dumps(info))
    return info


class DataFile:
    """A split's events as one data file of the events table, written beside its staged
    part while every row holds the same ``event_date`` (the table's partition: a daily
    landing file's rows): when the batch keeps every row (``staging``), the commit moves
    it into the table's ``event_date=<date>/`` folder instead of writing the rows again.
    A second date, or no date, drops it (``add`` returns False)."""

    def __init__(self, fs, where: str, source: Source):
        self.fs, self.where = fs, where
        self.schema = data_schema(events_schema(source))
        self.stats = FileStats(self.schema)
        self.writer, self.date, self.rows = None, None, 0

    def add(self, ev: pa.Table) -> bool:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        dates = ev.column("event_date")
        first = dates[0].as_py()
        if dates.null_count or (self.date is not None and first != self.date) \
                or pc.count_distinct(dates).as_py() != 1:
            self.drop()
            return False
        t = ev.select(self.schema.names).cast(self.schema)
        if self.writer is None:
            self.writer, self.date = pq.ParquetWriter(self.where, self.schema,
                                                      filesystem=self.fs), first
        self.writer.write_table(t)
        self.stats.update(t)
        self.rows += t.num_rows
        return True

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def drop(self) -> None:
        """No data file after all: the temporary file is deleted."""
        self.close()
        if self.fs.get_file_info(self.where).type != 0:
            self.fs.delete_file(self.where)
        self.rows = 0

    def info(self) -> dict:
        """The file's ``load.LOADED`` fields (its ``path`` is the caller's)."""
        return {"size": self.fs.get_file_info(self.where).size, "rows": self.rows,
                "stats": self.stats.to_json(), "date": self.date}


def staged_options(schema: pa.Schema) -> dict:
    """Parquet options of a split's typed events: dictionaries only for the columns whose
    values repeat (text but the id, the file and occurrence numbers; not the ids, keys,
    lines and times, where a dictionary is built and dropped), and no column statistics
    (nothing prunes a staged part by them): half the time of the defaults."""
    repeat = [f.name for f in schema if pa.types.is_string(f.type) and f.name != "event_id"]
    return {"use_dictionary": repeat + ["_fi", "_n"], "write_statistics": False}


def _task(positions: Iterator[int], tasks: list[list[Split]], source: Source,
          ts_range: TimeRange, lake: lk.Lake, folder: str,
          failpoint: str | None = None, direct: frozenset[int] = frozenset()
          ) -> Iterator[dict]:
    """A partition function of the tasks' job: the splits of the tasks at ``positions``,
    one after another (``direct``: the splits that may give a data file); yields each
    split's ``INFO`` row. ``failpoint`` ``ingest:task``: the worker kills itself in the
    middle of the first split it reads (once per staging: the fault tests' killed task)."""
    for k in positions:
        for split in tasks[k]:
            if failpoint == "ingest:task":
                _kill_once(lake, folder)
            yield run_split(split, source, ts_range, lake, folder, split.index in direct)


def _kill_once(lake: lk.Lake, folder: str) -> None:
    marker = lk.join(folder, "killed")
    if not _is_file(lake, marker):
        lake.write_text(marker, "a task was killed here")
        os.kill(os.getpid(), signal.SIGKILL)


def _is_file(lake: lk.Lake, uri: str) -> bool:
    fs, where = lake.filesystem(uri)
    return fs.get_file_info(where).type != 0


def finished(lake: lk.Lake, folder: str, split: Split) -> dict | None:
    """The counts of a split a task finished (its files moved in place), or None."""
    try:
        return json.loads(lake.read_text(part(folder, "info", split.index) + ".json"))
    except (FileNotFoundError, OSError, ValueError):
        return None


def run_splits(spark, splits: list[Split], source: Source, ts_range: TimeRange,
               lake: lk.Lake, folder: str, echo=None,
               direct: frozenset[int] = frozenset()) -> list[dict]:
    """Every split read, typed and written: by Spark's executors (the splits packed into
    tasks), or (``spark`` None) one after another here (``direct``: the splits that may
    give a data file, ``DataFile``). Returns their ``INFO`` rows in split order."""
    if not splits:
        return []
    if spark is None:
        out = []
        for k, s in enumerate(splits):
            out.append(run_split(s, source, ts_range, lake, folder, s.index in direct))
            if echo is not None and (k + 1 == len(splits)
                                     or splits[k + 1].file_index != s.file_index):
                echo(f"  read {s.label}")
        return out
    failpoint = environment.get("SES_FAILPOINT")
    done: dict[int, dict] = {}
    watch = FilesRead(lake, folder, splits, echo) if echo is not None else None
    try:
        _jobs(spark, splits, source, ts_range, lake, folder, echo, failpoint, done, direct)
    finally:
        if watch is not None:
            watch.stop()
    return [done[s.index] for s in splits]


def _jobs(spark, splits: list[Split], source: Source, ts_range: TimeRange, lake: lk.Lake,
          folder: str, echo, failpoint: str | None, done: dict[int, dict],
          direct: frozenset[int]) -> None:
    """The Spark jobs of ``run_splits``: one, and one more for the splits of a task that
    died (up to ``JOB_ATTEMPTS``); each split's ``INFO`` row goes to ``done``."""
    sc = spark.sparkContext
    for attempt in range(JOB_ATTEMPTS):
        todo = [k for k, s in enumerate(splits) if s.index not in done]
        if not todo:
            break
        chosen = packed([splits[k] for k in todo], sc.defaultParallelism)
        # an RDD job, a task per position: no query for Spark SQL to plan (its first
        # plan in a new JVM costs about 2 s, a fixed cost of every ingest)
        positions = sc.parallelize(range(len(chosen)), len(chosen))
        try:
            rows = positions.mapPartitions(
                lambda it, chosen=chosen: _task(it, chosen, source, ts_range, lake, folder,
                                                failpoint, direct)).collect()
        except Exception as exc:  # noqa: BLE001 - a task that died: its splits run again
            if attempt + 1 == JOB_ATTEMPTS or not died(exc):
                raise
            for k in todo:  # what the failed job's other tasks finished is kept
                info = finished(lake, folder, splits[k])
                if info is not None:
                    done[splits[k].index] = info
            if echo is not None:
                echo(f"  a task of ingest died ({str(exc).splitlines()[0][:120]}); "
                     f"{len(todo) - sum(splits[k].index in done for k in todo)} split(s) "
                     "run again")
            continue
        done.update((r["split"], r) for r in rows)


class FilesRead(threading.Thread):
    """Per-file progress of a Spark job of ingest tasks: every ``EVERY`` seconds, the files
    all of whose splits a task has finished since the last line (a finished split leaves
    its counts in ``info/``): ``N/M file(s) read: name, …``. Nothing for a job that ends
    sooner."""

    def __init__(self, lake: lk.Lake, folder: str, splits: list[Split], echo,
                 every: float = EVERY):
        super().__init__(name="ingest files read", daemon=True)
        self.lake, self.folder, self.echo, self.every = lake, folder, echo, every
        self.splits = splits
        self.files = {s.file_index: s.label for s in splits}
        self.told: set[int] = set()
        self.done = threading.Event()
        self.start()

    def run(self) -> None:
        while not self.done.wait(self.every):
            try:
                self.tell()
            except Exception:  # noqa: BLE001, S112 - a progress line never fails an ingest
                continue

    def tell(self) -> None:
        names = set(self.lake.children(lk.join(self.folder, "info"), files=True))
        open_files = {s.file_index for s in self.splits
                      if lk.file_name(part(self.folder, "info", s.index)) + ".json"
                      not in names}
        new = sorted(set(self.files) - open_files - self.told)
        if not new:
            return
        self.told |= set(new)
        shown = ", ".join(self.files[k] for k in new[:3]) + (" …" if len(new) > 3 else "")
        self.echo(f"  {len(self.told)}/{len(self.files)} file(s) read: {shown}")

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=1)


JOB_ATTEMPTS = 3  # a Spark job of ingest tasks, run again for the splits a dead task left


def died(exc: BaseException) -> bool:
    """A task lost to a dead Python worker or executor (not an error of the code)."""
    text = str(exc)
    return any(m in text for m in ("Python worker exited unexpectedly", "crashed",
                                   "ExecutorLostFailure", "Connection reset",
                                   "EOFException"))
