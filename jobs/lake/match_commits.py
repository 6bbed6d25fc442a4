"""Which run made a match table's commits: publish writes the run's row into each
commit's metadata (``RUN_KEY``), and ``unchanged_since`` reads the table's history to tell
whether its rows are still those a run left (a night skips a pattern whose table and
range nothing changed since)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from jobs.lake import store as lk
from jobs.lake.extent import UPKEEP

RUN_KEY = "ses.run"  # commit metadata: the runs row of the run that made the commit
NO_ROWS = UPKEEP | {"SET TBLPROPERTIES", "UPDATE TABLE METADATA", "UPDATE FIELD METADATA"}
SINCE_COMMITS = 20  # commits looked at, newest first


def unchanged_since(lake: lk.Lake, name: str, run: Mapping) -> bool:
    """Whether the rows of ``matches/<name>`` are those ``run`` (a runs row) left: the
    newest commit that changed rows is that run's (its ``RUN_KEY``), or, when the run
    committed nothing, one made before it started. A commit this cannot place (another
    writer's, or one older than the commits looked at) answers False."""
    table = lake.read_table(lake.matches(name))
    if table is None:
        return False
    for commit in table.history(SINCE_COMMITS):  # newest first
        if RUN_KEY in commit:
            if json.loads(commit[RUN_KEY]).get("run_id") == run["run_id"]:
                return True
            quiet = not run["inserted"] and not run["deleted"]
            return quiet and commit["timestamp"] < run["started_at"].timestamp() * 1000
        if commit.get("operation") not in NO_ROWS and "ses.operation" not in commit:
            return False
    return False
