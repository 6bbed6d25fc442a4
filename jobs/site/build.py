"""The catalogue site: static HTML and PNG next to the lake (``make docs``, and after every
``run``), readable offline (no script, no font or style from the network): per pattern its
description, file, version, shape, examples, matches per month, a few matches on a time
axis, runs and columns; per source its event types; the models; the lineage; the runs;
and the quality results (the site's own rendering of Great Expectations' results)."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import datetime, timezone
from pathlib import Path

from jobs.config import load_profile
from jobs.config.profiles import AlertSettings
from jobs.core.rowpattern.program import automaton, compile_row_pattern
from jobs.lake.health import VOLUME
from jobs.lake.store import Lake
from jobs.progress import say
from jobs.site import pictures
from jobs.site.pages import PageCache, SiteContent, gather
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


def build_site(lake: Lake, out: Path | None = None, echo=say) -> Path:
    """Write the site for the lake; returns its index.html."""
    out = out or site_folder(lake)
    cache = PageCache(out if out.exists() else None)
    cat = gather(lake, cache)
    tmp = out.with_name(out.name + ".new")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "img").mkdir(parents=True)
    img = _write(cat, tmp, out / "img" if out.exists() else None)
    cache.write(tmp)
    shutil.rmtree(out, ignore_errors=True)  # readers see the old site or the new one
    tmp.rename(out)
    echo(f"catalogue: {out / 'index.html'} ({len(cat.patterns)} patterns, "
         f"{len(cat.sources)} sources, {len(cat.models)} models; pictures: {img.drawn} drawn, "
         f"{img.copied} unchanged)")
    return out / "index.html"


def _threshold() -> str:
    """The volume rule's threshold of the profile in use, for the page's legend."""
    try:
        return f"{load_profile().alerts.threshold:g}"
    except Exception:  # noqa: BLE001 - a legend: the default then
        return f"{AlertSettings().threshold:g}"


class Pictures:
    """The site's pictures, each drawn only when what it shows changed: a picture whose
    inputs have the same digest as in the previous build is copied from it (a night
    redraws the run histories, not every pattern's shape). ``digests.json`` keeps them."""

    INDEX = "digests.json"
    CODE = hashlib.sha256(Path(pictures.__file__).read_bytes()).hexdigest()  # how they are drawn

    def __init__(self, folder: Path, previous: Path | None):
        self.folder, self.previous, self.digests = folder, previous, {}
        self.old = {}
        if previous is not None and (previous / self.INDEX).exists():
            try:
                self.old = json.loads((previous / self.INDEX).read_text(encoding="utf-8"))
            except ValueError:  # an unreadable index: every picture is drawn
                pass
        self.drawn = self.copied = 0

    def draw(self, fn, name: str, *data) -> None:
        digest = hashlib.sha256(repr((self.CODE, fn.__name__, data)).encode()).hexdigest()
        self.digests[name] = digest
        before = self.previous / name if self.previous is not None else None
        if before is not None and self.old.get(name) == digest and before.exists():
            shutil.copyfile(before, self.folder / name)
            self.copied += 1
        else:
            fn(data[0], self.folder / name, *data[1:])  # each picture: (data, path, title...)
            self.drawn += 1

    def save(self) -> None:
        (self.folder / self.INDEX).write_text(json.dumps(self.digests), encoding="utf-8")


def _write(cat: SiteContent, out: Path, previous: Path | None = None) -> Pictures:
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

    img = Pictures(out / "img", previous)
    img.draw(pictures.lineage, "lineage.png", cat.lineage())
    img.draw(pictures.run_history, "runs.png", cat.runs[-60:])
    page("index.html", "index.html", title="SiteContent", cat=cat)
    for p in cat.patterns:
        if getattr(p.pattern, "kind", None) == "row_pattern":
            states, edges, accepting = automaton(compile_row_pattern(p.pattern.query.pattern))
            page("row_pattern.html", f"patterns/{p.name}.html", title=p.name, p=p,
                 automaton_svg=pictures.automaton_svg(states, edges, accepting),
                 runs_svg=pictures.run_history_svg(p.runs[-40:]),
                 examples=_examples(p.pattern))
            continue
        if p.pattern is not None:
            img.draw(pictures.pattern_shape, f"{p.name}_shape.png", p.pattern)
            img.draw(pictures.timeline, f"{p.name}_timeline.png", p.shown)
        page("pattern.html", f"patterns/{p.name}.html", title=p.name, p=p,
             runs_svg=pictures.run_history_svg(p.runs[-40:]),
             volume_svg=pictures.volume_svg(cat.volume("pattern", p.name),
                                            title="new matches per night"),
             months_svg=pictures.per_month_svg(p.per_month),
             funnel_svg=pictures.funnel_svg(cat.funnel(p.name)),
             funnel_history_svg=pictures.funnel_history_svg(cat.funnel_nights(p.name)),
             examples=_examples(p.pattern) if p.pattern is not None else [])
    for s in cat.sources:
        mine = [p for p in cat.patterns if p.pattern is not None and p.pattern.source == s.name]
        page("source.html", f"sources/{s.name}.html", title=f"source {s.name}", s=s,
             patterns=mine)
    page("runs.html", "runs.html", title="Runs", runs=list(reversed(cat.runs)))
    days = sorted({r["logical_date"] for r in cat.runs if r.get("logical_date")})[-14:]
    volumes = [pictures.volume_svg(cat.volume(kind, name), title=f"{kind} {name}")
               for kind, name in sorted({(c["subject_kind"], c["subject"]) for c in cat.health
                                         if c["check"] == VOLUME})]
    page("operations.html", "operations.html", title="Operations", cat=cat, volumes=volumes,
         threshold=_threshold(),
         failed_runs=[r for r in reversed(cat.runs) if r.get("status") != SUCCESS
                      and r.get("logical_date") in days])
    page("models.html", "models.html", title="Models", models=cat.models)
    gx_index = cat.home / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html"
    page("quality.html", "quality.html", title="Quality", validations=cat.quality,
         gx_index=gx_index.resolve().as_uri() if gx_index.exists() else None)
    img.save()
    return img
