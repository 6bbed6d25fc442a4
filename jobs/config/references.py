"""The reference tables (``conf/reference/<name>.csv``, the view ``reference_<name>``),
checked before an engine reads them: both engines guess at a ragged file (DuckDB's
sniffer can read it as no rows at all, Spark fills nulls or drops fields), so a file
without a header, with a column named twice or a row whose field count is not the
header's is a ``ConfigError`` naming the file and line instead."""

from __future__ import annotations

import csv
from pathlib import Path

from jobs.config.project import current_project
from jobs.config.strict import ConfigError
from jobs.core.inputs import repeated

_CHECKED: dict[Path, tuple] = {}  # file -> (mtime, size) it was last found sound at


def check_reference(path: Path) -> None:
    """``path`` is a CSV file with a header of distinct names and rows of its length."""
    st = path.stat()
    if _CHECKED.get(path) == (st.st_mtime_ns, st.st_size):
        return
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if not header:
                raise ConfigError(f"{path}:1: a reference table needs a header line naming "
                                  "its columns")
            names = [n.strip() for n in header]
            twice = repeated(names)
            if twice:
                raise ConfigError(f"{path}:1: the header names {', '.join(map(repr, twice))} "
                                  "more than once")
            for fields in reader:
                if fields and len(fields) != len(names):
                    raise ConfigError(f"{path}:{reader.line_num}: {len(fields)} field(s) where "
                                      f"the header names {len(names)}")
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{path}: not a UTF-8 CSV file ({str(exc)[:120]})") from None
    _CHECKED[path] = (st.st_mtime_ns, st.st_size)


def reference_files() -> dict[str, Path]:
    """View name -> file of the project's reference tables, each checked."""
    folder = current_project().references
    files = sorted(folder.glob("*.csv")) if folder.is_dir() else []
    for path in files:
        check_reference(path)
    return {f"reference_{p.stem}": p for p in files}
