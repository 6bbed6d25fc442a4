"""The scale figures as one picture (docs/benchmarks/scale.png), from the JSON files the
benchmarks leave in bench/out/:

  left    match job seconds against events (log-log), local and standalone, with the
          line of linear growth through the largest set
  middle  peak resident memory of each process kind against events
  right   publish: the Python driver's peak memory against matches, before (the driver
          fed delta-rs) and after (executors write, the driver commits)

    python bench/plot_scale.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"
PNG = Path(__file__).resolve().parent.parent / "docs" / "benchmarks" / "scale.png"


def _load(path: Path) -> list[dict]:
    return json.loads(path.read_text()) if path.exists() else []


def main() -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = {p: [r for r in _load(OUT / f"spark_pipeline-{p}.json") if r["set"].endswith("m")]
            for p in ("local", "standalone")}
    publish = {t: _load(OUT / "publish" / f"publish_memory-{t}.json")
               for t in ("before", "after")}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    ax = axes[0]
    for profile, rows in runs.items():
        if not rows:
            continue
        x = [r["events"] for r in rows]
        ax.plot(x, [r["total_s"] for r in rows], "o-", label=f"{profile}: match job")
        ax.plot(x, [r["phase1_s"] for r in rows], "s--", label=f"{profile}: phase 1")
        ax.plot(x, [r["total_s"] + r["publish_s"] for r in rows], "^:",
                label=f"{profile}: match job + publish")
    if runs["local"]:
        r0 = runs["local"][-1]
        x = [r["events"] for r in runs["local"]]
        ax.plot(x, [r0["total_s"] * e / r0["events"] for e in x], color="grey", lw=0.8,
                label="linear growth (through local at the largest set)")
    ax.set(xscale="log", yscale="log", xlabel="events", ylabel="seconds",
           title="Time against events (2 cores)")
    ax.legend(fontsize=7)
    ax = axes[1]
    for profile, rows in runs.items():
        x = [r["events"] for r in rows]
        for key, label in (("driver_peak_mb", "Python driver"), ("jvm_peak_mb", "driver JVM"),
                           ("executor_peak_mb", "executor JVM"),
                           ("worker_peak_mb", "Python worker")):
            y = [r.get(key, 0) for r in rows]
            if any(y):
                ax.plot(x, y, "o-", label=f"{profile}: {label}")
    ax.set_ylim(bottom=0)
    ax.set(xscale="log", xlabel="events", ylabel="peak RSS (MB)",
           title="Peak memory per process against events")
    ax.legend(fontsize=7)
    ax = axes[2]
    for tag, rows in publish.items():
        if rows:
            ax.plot([r["matches"] for r in rows], [r["driver_peak_mb"] for r in rows], "o-",
                    label=f"{tag}: {rows[0]['publish']}")
    ax.set(xscale="log", xlabel="matches published (full recompute)",
           ylabel="Python driver peak RSS (MB)", title="Publish: driver memory")
    ax.legend(fontsize=7)
    fig.tight_layout()
    PNG.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(PNG, dpi=100)
    print(PNG)
    return 0


if __name__ == "__main__":
    sys.exit(main())
