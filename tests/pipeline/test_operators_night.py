"""The operator's night on real Spark and Delta (chemo_mw, the match-window paper's data):
a new version of a pattern that would empty its table is held, the old table stays and
the alert says how to accept it; accepted, it is published. A stale source fails the
night with the line that says since when, and both reach a webhook."""

import json
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from deltalake import DeltaTable

from jobs.config import Project
from jobs.config.project import use_project
from jobs.lake import store as lk
from jobs.lake.changes import changes, parse_point
from jobs.lake.health import read_checks
from jobs.pipeline.run import run_all, run_task
from jobs.pipeline.upkeep.lineage import read_events, run_uuid
from jobs.pipeline.upkeep.steps import retract_task
from jobs.site.build import build_site
from jobs.status import FAILED
from jobs.tools.query import run_duckdb
from jobs.tools.runlog import check_lines

from ..conftest import ROOT, make_profile
from ..lakes import published_ids

P1 = ROOT / "patterns" / "mw_chemo_p1.yaml"


class _Hook(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.received.append(dict(body, path=self.path))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture
def webhook(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hook)
    server.received = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    server.url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("SES_ALERT_WEBHOOK", f"{server.url}/alerts")
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project of its own: the repo's conf, expectations, one pattern; chemo_mw with a
    freshness of 2 days."""
    home = tmp_path / "project"
    (home / "patterns").mkdir(parents=True)
    shutil.copytree(ROOT / "conf", home / "conf")
    shutil.copytree(ROOT / "expectations", home / "expectations")
    sources = yaml.safe_load((home / "conf" / "sources.yaml").read_text())
    sources["sources"]["chemo_mw"]["freshness"] = {"warn_after": "1d", "error_after": "2d"}
    (home / "conf" / "sources.yaml").write_text(yaml.safe_dump(sources))
    shutil.copy(P1, home / "patterns" / P1.name)
    monkeypatch.setenv("SES_PROJECT_DIR", str(ROOT))  # restored after the test
    before = use_project(Project(home))
    yield home
    use_project(before)


def test_a_new_version_that_empties_its_table_is_held_until_accepted(spark, tmp_path,
                                                                     webhook):
    landing = tmp_path / "landing"
    shutil.copytree(ROOT / "data" / "landing" / "chemo_mw", landing / "chemo_mw")
    # OpenLineage to the same server (its path: /api/v1/lineage)
    profile = make_profile(tmp_path, landing=landing, lineage_url=webhook.url)
    path = tmp_path / P1.name
    shutil.copy(P1, path)
    quiet = dict(echo=lambda *_: None)
    first = run_all(spark, profile, "2010-08-30", [str(path)], **quiet)[0]
    before = published_ids(profile, "mw_chemo_p1")
    assert first["status"] == "success" and len(before) == 3
    # a retraction: the changes since the first run are exactly the matches that went
    # and came (e3, the first P dose of patient 1, is bound by some of them)
    retract_task(profile, "chemo_mw", ["e3"], None, "test")
    second = run_all(spark, profile, "2010-08-30", [str(path)], **quiet)[0]
    ids = published_ids(profile, "mw_chemo_p1")
    assert ids != before
    lake = lk.Lake(profile.lake)
    rows, summary = changes(lake, lake.matches("mw_chemo_p1"), parse_point(first["run_id"]))
    went = {r["match_id"] for r in rows.to_pylist() if r["change"] == "delete"}
    came = {r["match_id"] for r in rows.to_pylist() if r["change"] == "insert"}
    assert went == before - ids and came == ids - before and went
    assert summary["deleted"] == second["deleted"] and summary["updated"] == 0
    as_of = run_duckdb(lake, "SELECT match_id FROM matches_mw_chemo_p1", None,
                       parse_point(first["run_id"]))
    assert set(as_of.column("match_id").to_pylist()) == before  # the table as run 1 left it
    # lineage: each run's START and COMPLETE, read back from <lake>/_lineage/
    events = read_events(lake, "2010-08-30")
    assert [(e["eventType"], e["job"]["name"]) for e in events
            if e["run"]["runId"] == run_uuid(second["run_id"], "mw_chemo_p1")] == \
        [("START", "mw_chemo_p1"), ("COMPLETE", "mw_chemo_p1")]
    done = events[-1] if events[-1]["eventType"] == "COMPLETE" else events[-2]
    assert done["inputs"][0]["name"] == "events/chemo_mw"
    assert done["inputs"][0]["facets"]["version"]["datasetVersion"] == \
        str(DeltaTable(lake.events("chemo_mw")).version())
    assert done["outputs"][0]["name"] == "matches/mw_chemo_p1"
    assert done["outputs"][0]["facets"]["version"]["datasetVersion"] == \
        str(DeltaTable(lake.matches("mw_chemo_p1")).version())
    assert done["run"]["facets"]["ses"]["pattern_version"] == second["pattern_version"]
    assert done["run"]["facets"]["ses"]["inserted"] == second["inserted"]
    assert done["run"]["facets"]["nominalTime"]["nominalStartTime"] == "2010-08-30T00:00:00Z"
    posted = [b for b in webhook.received if "eventType" in b]  # the same events over HTTP
    assert len(posted) == 4 and {b["path"] for b in posted} == {"/api/v1/lineage"}
    assert done["run"]["runId"] in {b["run"]["runId"] for b in posted}
    # the typo of the story: 'Cx' for 'C' (its example has the same typo)
    path.write_text(P1.read_text().replace("'C'", "'Cx'").replace("type: C,", "type: Cx,"))
    lines = []
    held = run_all(spark, profile, "2010-08-31", [str(path)], echo=lines.append)[0]
    assert held["status"] == FAILED and held.error_type == "HeldChange" and held.final
    assert f"not published: it would leave 0 of the {len(ids)} published matches" in held.message
    assert "variable c can never bind" in held.message
    assert "ses run --accept-changes mw_chemo_p1" in held.message
    assert published_ids(profile, "mw_chemo_p1") == ids  # the old table stays
    alert = next(a for a in webhook.received if a.get("kind") == "held_change")
    assert alert["subject"] == "mw_chemo_p1" and alert["severity"] == "error"
    assert alert["action"] == "ses run --accept-changes mw_chemo_p1 (if intended)"
    assert any("alerts: " in line for line in lines)
    accepted = run_all(spark, profile, "2010-08-31", [str(path)],
                       accept_changes=["mw_chemo_p1"], **quiet)[0]
    assert accepted["status"] == "success" and accepted["deleted"] == len(ids)
    assert published_ids(profile, "mw_chemo_p1") == set()
    rows, summary = changes(lake, lake.matches("mw_chemo_p1"), parse_point(held["run_id"]))
    assert {r["match_id"] for r in rows.to_pylist()} == ids  # the new version's change
    assert set(rows.column("change").to_pylist()) == {"delete"}
    failed = [e for e in read_events(lake, "2010-08-31") if e["eventType"] == "FAIL"]
    assert len(failed) == 1 and "--accept-changes" in \
        failed[0]["run"]["facets"]["errorMessage"]["message"]


def test_a_stale_source_fails_the_night_and_says_since_when(spark, tmp_path, project, webhook):
    landing = tmp_path / "landing"
    shutil.copytree(ROOT / "data" / "landing" / "chemo_mw", landing / "chemo_mw")
    profile = make_profile(tmp_path, landing=landing)
    lines = []
    rows = run_all(spark, profile, "2010-08-30", echo=lines.append)
    assert rows[0]["status"] == "success"  # the patterns still ran
    stale = [r for r in rows if r.get("source") == "chemo_mw" and "pattern" not in r]
    assert len(stale) == 1 and stale[0]["status"] == FAILED
    # the newest event of chemo_mw (Fig. 1) is of 2010-07-22; the night is 2010-08-30
    assert "nothing new since 2010-07-22" in stale[0]["message"]
    assert any(line.startswith("ERROR: freshness: source chemo_mw") for line in lines)
    checks = read_checks(lk.Lake(profile.lake), "freshness")
    assert [(c.subject, c.status) for c in checks] == [("chemo_mw", "error")]
    shown = check_lines(lk.Lake(profile.lake), {rows[0]["run_id"]})  # what `ses runs` adds
    assert len(shown) == 1 and "freshness" in shown[0] and "error" in shown[0]
    # the DAG's task of the source: its patterns run, and the stale source fails the task
    outcomes, stale = run_task(lambda: spark, profile, "dag-run-1", "2010-08-31",
                               [project / "patterns" / P1.name], echo=lambda *_: None)
    assert [o.status for o in outcomes] == ["success"]
    assert [r["source"] for r in stale] == ["chemo_mw"]
    assert "nothing new since 2010-07-22" in stale[0]["message"]
    # the catalogue's operations page
    index = build_site(lk.Lake(profile.lake), tmp_path / "site", echo=lambda *_: None)
    page = (index.parent / "operations.html").read_text()
    assert 'id="freshness"' in page and "nothing new since 2010-07-22" in page
    # the freshness table's, and the problems of both nights (the run and the DAG task)
    assert page.count('class="bad">error</td>') == 3
    assert '<svg class="volume"' in page  # the nights' volume (one night: no band yet)
    alert = next(a for a in webhook.received if a.get("kind") == "freshness")
    assert alert["since"].startswith("2010-07-22") and alert["logical_date"] == "2010-08-30"
