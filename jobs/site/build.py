"""The catalogue site: static HTML and PNG next to the lake (``make docs``, and after every
``run``), readable offline (no script, no font or style from the network): per pattern its
description, file, version, shape, examples, matches per month, a few matches on a time
axis, runs and columns; per source its event types; the models; the lineage; the runs;
and the quality results (the site's own rendering of Great Expectations' results)."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from pathlib import Path

from jobs.lake.store import Lake
from jobs.site import pictures
from jobs.site.pages import SiteContent, gather
from jobs.status import SUCCESS

TEMPLATES = Path(__file__).resolve().parent / "templates"


def site_folder(lake: Lake) -> Path:
    """Where the site of a lake goes: ``site/`` beside a local lake; in the lake's folder
    on this machine (``Lake.local_home``) for a lake on an object store."""
    return (Path(lake.root).resolve().parent if lake.local else lake.local_home()) / "site"


def _examples(pattern) -> list[dict]:
    out = []
    for ex in pattern.examples:
        columns = list(dict.fromkeys(k for e in ex.events for k in e))
        out.append({"name": ex.name, "columns": columns,
                    "rows": [[e.get(k, "") for k in columns] for e in ex.events],
                    "expect": list(ex.expect)})
    return out


def build_site(lake: Lake, out: Path | None = None, echo=print) -> Path:
    """Write the site for the lake; returns its index.html."""
    cat = gather(lake)
    out = out or site_folder(lake)
    tmp = out.with_name(out.name + ".new")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "img").mkdir(parents=True)
    _write(cat, tmp)
    shutil.rmtree(out, ignore_errors=True)  # readers see the old site or the new one
    tmp.rename(out)
    echo(f"catalogue: {out / 'index.html'} ({len(cat.patterns)} patterns, "
         f"{len(cat.sources)} sources, {len(cat.models)} models)")
    return out / "index.html"


def _write(cat: SiteContent, out: Path) -> None:
    from jinja2 import Environment, FileSystemLoader, select_autoescape

    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape())
    env.globals["SUCCESS"] = SUCCESS  # the status words of jobs.status
    common = {"built": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
              "lake": cat.lake}

    def page(template: str, path: str, **kw) -> None:
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        root = "../" * path.count("/")
        target.write_text(env.get_template(template).render(root=root, **common, **kw),
                          encoding="utf-8")

    img = out / "img"
    pictures.lineage(cat.lineage(), img / "lineage.png")
    pictures.run_history(cat.runs[-60:], img / "runs.png")
    page("index.html", "index.html", title="SiteContent", cat=cat)
    for p in cat.patterns:
        if p.pattern is not None:
            pictures.pattern_shape(p.pattern, img / f"{p.name}_shape.png")
            pictures.per_month(p.per_month, img / f"{p.name}_months.png",
                               f"matches of {p.name} per month (by first event)")
            pictures.timeline(p.shown, img / f"{p.name}_timeline.png")
            pictures.run_history(p.runs[-40:], img / f"{p.name}_runs.png")
        page("pattern.html", f"patterns/{p.name}.html", title=p.name, p=p,
             examples=_examples(p.pattern) if p.pattern is not None else [])
    for s in cat.sources:
        mine = [p for p in cat.patterns if p.pattern is not None and p.pattern.source == s.name]
        page("source.html", f"sources/{s.name}.html", title=f"source {s.name}", s=s,
             patterns=mine)
    page("runs.html", "runs.html", title="Runs", runs=list(reversed(cat.runs)))
    page("models.html", "models.html", title="Models", models=cat.models)
    gx_index = cat.home / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    page("quality.html", "quality.html", title="Quality", validations=cat.quality,
         gx_index=gx_index.resolve().as_uri() if gx_index.exists() else None)
