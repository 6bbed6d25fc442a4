"""The analysts' guide (docs/patterns.md) does not lie: every complete pattern file in it
loads, and its examples (the tiny tables the text explains) give exactly the matches the
text shows."""

import re
from pathlib import Path

import pytest

from jobs.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "patterns.md"
BLOCKS = [b for b in re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(), re.S)
          if re.search(r"^name: ", b, re.M)]


def test_the_guide_has_an_example_per_construct():
    assert len(BLOCKS) >= 10


@pytest.mark.parametrize("block", BLOCKS, ids=[re.search(r"^name: (\w+)", b, re.M).group(1)
                                               for b in BLOCKS])
def test_each_guide_pattern_validates_with_its_examples(block, tmp_path, capsys):
    name = re.search(r"^name: (\w+)", block, re.M).group(1)
    path = tmp_path / f"{name}.yaml"
    path.write_text(block)
    code = main(["validate", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "example(s) pass" in out
