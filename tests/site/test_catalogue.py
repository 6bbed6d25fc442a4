"""The catalogue site built from a night's lake opens offline in a headless browser."""

from pathlib import Path

import pytest

from jobs.core.language.patternfile import load_pattern
from jobs.pipeline.context import RunContext
from jobs.project.patterns import pattern_paths, row_pattern_paths


def _chromium() -> str:
    import shutil as sh

    found = sh.which("chromium") or sh.which("chromium-browser")
    assert found, "the catalogue tests need headless Chromium: `make test` installs it " \
                  "(Debian: apt-get install chromium)"
    return found


def screenshot(page: Path, out: Path):
    """A real headless Chromium renders the page; returns the picture's pixels."""
    import subprocess

    import matplotlib.image as mpimg

    proc = subprocess.run([_chromium(), "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", "--window-size=1200,1600",
                           f"--screenshot={out}", page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert out.exists(), proc.stderr[-2000:]
    return mpimg.imread(out)


@pytest.mark.browser
def test_catalogue_site_opens_offline_in_a_headless_browser(nightly, tmp_path):
    import dataclasses
    import re
    from html import unescape

    import numpy as np

    from jobs.pipeline.upkeep.steps import site_step

    profile = dataclasses.replace(nightly[0], site=str(tmp_path / "site"))
    log = []
    site_step(RunContext.start(profile, "site"), log.append)
    site = tmp_path / "site"
    assert any(line.startswith("catalogue:") for line in log), log
    pages = {"index": site / "index.html",
             "sequence pattern": site / "patterns" / "sepsis_rising_crp_then_icu.html",
             "window pattern": site / "patterns" / "paper_ex5_lab_to_home.html",
             "disjunction": site / "patterns" / "sepsis_escalation_either_way.html",
             "row pattern": site / "patterns" / "sepsis_er_treatment_then_admission.html",
             "source": site / "sources" / "sepsis.html", "runs": site / "runs.html",
             "quality": site / "quality.html", "models": site / "models.html"}
    for kind, page in pages.items():
        html = page.read_text()
        # offline: nothing is loaded from the network, every picture is there
        assert not re.search(r"""<(script|link)[^>]*(src|href)=["']https?:""", html), kind
        for src in re.findall(r'<img src="([^"]+)"', html):
            assert (page.parent / src).resolve().is_file(), (kind, src)
        pixels = screenshot(page, tmp_path / f"{kind.replace(' ', '_')}.png")
        assert pixels.shape[0] >= 1000 and pixels.shape[1] >= 1000, kind
        colors = len(np.unique(pixels.reshape(-1, pixels.shape[-1])[::97], axis=0))
        assert colors > 20, f"{kind}: the screenshot looks blank ({colors} colors)"
    seq = pages["sequence pattern"].read_text()
    for part in ("patterns/sepsis_rising_crp_then_icu.yaml", "rising CRP values",
                 "Matches per month", "A few matches", "partition attribute",
                 "CRP rises twice"):
        assert part in seq, part
    # the funnel of the night: each step, its partitions and windows, what stopped the rest
    labs = (site / "patterns" / "sepsis_labs_then_antibiotics.html").read_text()
    assert '<svg class="funnel"' in labs and "step 2: l, c" in labs
    assert re.search(r"stopped by no a \(a\.event_type = 'IV Antibiotics'\): \d",
                     unescape(labs))
    # a match shows its bound events' values and its measures, not only their ids
    high = (site / "patterns" / "sepsis_crp_run_high_average.html").read_text()
    assert re.search(r"CRP at [0-9-]+ [0-9:]+ \([^)]*value = [0-9.]+\)", high), "values"
    assert "<th>measures</th>" in high
    assert "Admission IC" in pages["source"].read_text()
    rows = pages["row pattern"].read_text()  # a .sql pattern: its automaton and statement
    assert '<svg class="automaton"' in rows and "PERMUTE(AB, LQ)" in rows
    assert re.search(r"matches_sepsis_er_treatment_then_admission</code> \([1-9][0-9,]* rows",
                     rows) and "second_treatment" in rows
    quality = pages["quality"].read_text()
    assert "matches_sepsis_rising_crp_then_icu" in quality and "__none__" not in quality
    index = pages["index"].read_text()
    assert all(f"patterns/{load_pattern(p).name}.html" in index for p in pattern_paths())
    assert all(f"patterns/{p.stem}.html" in index for p in row_pattern_paths())
    # built again on the same lake: every picture is the previous build's, none is drawn
    before = {p.name: p.read_bytes() for p in (site / "img").glob("*.png")}
    site_step(RunContext.start(profile, "site"), log.append)
    assert re.search(r"pictures: 0 drawn, [1-9]\d* unchanged", log[-1]), log[-1]
    assert {p.name: p.read_bytes() for p in (site / "img").glob("*.png")} == before
