"""What `make` leaves in .venv: every process of a run imports Spark, Great Expectations
and Airflow, so their bytecode must be compiled once at install (where
PYTHONDONTWRITEBYTECODE is set, nothing else writes it, and each process would compile
them again)."""

import importlib.util
import sys
from pathlib import Path

import pytest

from .conftest import ROOT

VENV = ROOT / ".venv"


@pytest.mark.skipif(not (VENV / ".installed-from-lock").exists()
                    or Path(sys.prefix).resolve() != VENV.resolve(),
                    reason="runs in the .venv that make builds")
@pytest.mark.parametrize("package", ["pyspark", "great_expectations", "airflow", "pandas",
                                     "pyarrow", "deltalake"])
def test_the_venv_has_the_bytecode_of_the_heavy_packages(package):
    spec = importlib.util.find_spec(package)
    source = Path(spec.origin)
    compiled = Path(importlib.util.cache_from_source(str(source)))
    assert compiled.exists(), f"{package}: no {compiled.name}: make's venv build compiles it"
    assert compiled.stat().st_mtime >= source.stat().st_mtime
