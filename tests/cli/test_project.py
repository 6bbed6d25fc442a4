"""``ses`` works on the project it stands in: from a subfolder of a project elsewhere, and
from any folder with ``--project-dir`` (a Spark application in a subprocess). The fault
tests run every ``ses run`` they start from another folder with ``--project-dir``
(``tests/faults/conftest.py``), so this test runs Spark once."""

import os
import shutil
import subprocess
from pathlib import Path

from deltalake import DeltaTable

ROOT = Path(__file__).resolve().parents[2]
SES = ROOT / ".venv" / "bin" / "ses"


def _project(tmp_path: Path) -> Path:
    """A project of one pattern and one source, outside this checkout."""
    proj = tmp_path / "clinic"
    shutil.copytree(ROOT / "conf", proj / "conf")
    text = (proj / "conf" / "pipeline.yaml").read_text(encoding="utf-8")
    (proj / "conf" / "pipeline.yaml").write_text(text.replace("    site: site ", "    # site: ", 1))
    shutil.copytree(ROOT / "expectations", proj / "expectations")
    (proj / "patterns").mkdir()
    shutil.copy(ROOT / "patterns" / "mw_chemo_p1.yaml", proj / "patterns")
    shutil.copytree(ROOT / "data" / "landing" / "chemo_mw", proj / "data" / "landing" / "chemo_mw")
    return proj


def _ses(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SES_")}
    return subprocess.run([str(SES), *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


def test_ses_validate_and_run_find_the_project_they_stand_in(tmp_path):
    proj = _project(tmp_path)
    inside = proj / "patterns"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    out = _ses("validate", cwd=inside)
    assert out.returncode == 0, out.stderr
    assert "ok: 1 pattern file(s) valid" in out.stdout  # this project's one, not the checkout's
    out = _ses("validate", "--project-dir", str(proj), cwd=elsewhere)
    assert out.returncode == 0 and "ok: 1 pattern file(s) valid" in out.stdout, out.stderr
    out = _ses("validate", cwd=elsewhere)  # no project here: the checkout's own
    assert out.returncode == 0 and "ok: 1 pattern" not in out.stdout

    out = _ses("run", cwd=inside)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    lake = proj / "lake"  # the profile's relative path, resolved in the project
    runs = DeltaTable(str(lake / "runs")).to_pyarrow_table().to_pylist()
    assert [(r["pattern"], r["status"]) for r in runs] == [("mw_chemo_p1", "success")]
    assert runs[0]["matches"] > 0

    assert not (inside / "lake").exists()
    out = _ses("runs", "--project-dir", str(proj), cwd=elsewhere)  # the same lake, from afar
    assert out.returncode == 0 and out.stdout.count("mw_chemo_p1") == 1, out.stdout
    out = _ses("--project-dir", str(proj), "run", "--logical-date", "2999-01-01", cwd=elsewhere)
    assert out.returncode == 2 and "logical date" in out.stderr.lower(), out.stderr
    assert not (elsewhere / "lake").exists()


def test_validate_refuses_a_typo_in_the_projects_pipeline_yaml(tmp_path):
    """A key conf/pipeline.yaml may not hold is an error with its line and the nearest known
    key, from `ses validate` already (before any run reads the profile)."""
    proj = _project(tmp_path)
    conf = proj / "conf" / "pipeline.yaml"
    text = conf.read_text(encoding="utf-8").replace("      parallel_jobs: 2 ", "      paralel_jobs: 2 ", 1)
    conf.write_text(text, encoding="utf-8")
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "paralel_jobs" in row)
    out = _ses("validate", cwd=proj / "patterns")
    assert out.returncode == 2, out.stdout + out.stderr
    assert (f"{conf}:{line}: unknown key 'paralel_jobs' in profiles.local.match; "
            "did you mean 'parallel_jobs'?") in out.stderr
