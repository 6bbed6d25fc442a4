"""``PatternOutcome``: every failure becomes one value in one place, and one rule says
whether a retry can mend it (final or retryable), from the error's class alone."""

from jobs.core.engine.batches import MatchBudgetExceeded, MatchCapExceeded
from jobs.core.errors import EXIT_FAILED, EXIT_INPUT, EXIT_RETRY, InputError
from jobs.lake.locks import LakeBusy
from jobs.pipeline.outcome import (
    FINAL,
    RETRYABLE,
    PatternOutcome,
    error_kind,
    error_type,
    exit_code,
)
from jobs.pipeline.validate.quality import ValidationFailed
from jobs.runrecord import RunRecord
from jobs.status import SUCCESS

# what PySpark raises when a Python UDF fails on an executor: the executor's traceback
SPARK_TASK = """An exception was thrown from the Python worker. Please see the stack trace below.
Traceback (most recent call last):
  File "/work/main/jobs/pipeline/match/phase2.py", line 210, in run_partition
    raise MatchCapExceeded(message)
jobs.core.engine.runtime.{cls}: window at 2010-07-01 holds 1,000,001 matches: raise it

JVM stacktrace:
org.apache.spark.api.python.PythonException: ...
"""


class PythonException(Exception):
    """Stands for pyspark.errors.PythonException: a plain exception carrying the text."""


def test_the_kind_comes_from_the_class_of_the_error():
    assert error_kind(InputError("bad date")) == FINAL
    assert error_kind(ValidationFailed("suite failed")) == FINAL
    assert error_kind(LakeBusy("busy")) == RETRYABLE  # Transient: a rerun mends it
    assert error_kind(MatchBudgetExceeded("too big")) == FINAL
    assert error_kind(OSError("connection reset")) == RETRYABLE
    for cls in ("MatchCapExceeded", "MatchBudgetExceeded"):
        exc = PythonException(SPARK_TASK.format(cls=cls))
        assert error_type(exc) == cls and error_kind(exc) == FINAL
    other = PythonException(SPARK_TASK.format(cls="ZeroDivisionError"))
    assert error_type(other) == "ZeroDivisionError" and error_kind(other) == RETRYABLE
    # words in a message are not a class: a retryable error that mentions the cap
    assert error_kind(RuntimeError("MatchCapExceeded happened elsewhere")) == RETRYABLE


def test_one_value_for_every_outcome_and_the_exit_code_of_a_batch():
    ok = PatternOutcome.published(RunRecord("r1", pattern="p", status=SUCCESS, matches=3))
    capped = PatternOutcome.failed("r1", "q", MatchCapExceeded("window holds too much"))
    busy = PatternOutcome.failed("r1", "s", LakeBusy("the lake is busy"))
    flaky = PatternOutcome.failed("r1", "t", PythonException(SPARK_TASK.format(cls="OSError")))
    assert ok.ok and ok["matches"] == 3 and ok.kind is None
    assert not capped.ok and capped.final and capped["status"] == "failed"
    assert capped.message == "MatchCapExceeded: window holds too much"
    assert capped.line() == "q: failed (final): MatchCapExceeded: window holds too much"
    assert flaky.message.startswith("jobs.core.engine.runtime.OSError: window at")
    assert exit_code([ok]) == 0
    assert exit_code([ok, capped]) == EXIT_INPUT
    assert exit_code([busy]) == EXIT_RETRY
    assert exit_code([capped, flaky]) == EXIT_FAILED
