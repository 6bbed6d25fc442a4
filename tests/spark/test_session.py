"""The one SparkSession's preconditions: a missing Java is explained in one line."""

import pytest


def test_java_missing_is_explained(monkeypatch, tmp_path):
    from jobs.spark.session import JavaMissing, check_java

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    with pytest.raises(JavaMissing, match="Java 17 or newer.*openjdk-17-jre-headless"):
        check_java()
