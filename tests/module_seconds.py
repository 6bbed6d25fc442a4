"""Each test module's seconds in a whole run, for the order the workers take the modules
in (``conftest.longest_first``): the setup, call and teardown times of a
``pytest --durations=0`` run's output, summed per module, written to
tests/module_seconds.json.

    .venv/bin/python -m pytest -q --durations=0 -n 2 --dist loadfile > /tmp/durations.log
    .venv/bin/python tests/module_seconds.py /tmp/durations.log
"""

import json
import re
import sys
from collections import Counter
from pathlib import Path

LINE = re.compile(r"([\d.]+)s (?:call|setup|teardown)\s+(\S+?)::")


def module_seconds(lines) -> dict[str, float]:
    seconds: Counter = Counter()
    for line in lines:
        m = LINE.match(line)
        if m:
            seconds[m.group(2)] += float(m.group(1))
    return {k: round(v, 1) for k, v in seconds.most_common()}


if __name__ == "__main__":
    out = module_seconds(Path(sys.argv[1]).read_text().splitlines())
    Path(__file__).with_name("module_seconds.json").write_text(json.dumps(out, indent=0) + "\n")
    print(f"{len(out)} modules, {sum(out.values()):.0f} s in all")
