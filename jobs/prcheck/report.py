"""The ``pr-check`` report: Markdown for a pull-request comment, text for the terminal,
one PNG per pattern (matches per month, before and after)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path

from jobs.prcheck.diffs import ModelDiff, PatternDiff, PrCheck
from jobs.project.changes import UNCHANGED
from jobs.site.pictures import before_after
from jobs.status import FAILED

COUNTERS = (("events", "events read"), ("events_after_filter", "kept by the filter"),
            ("partitions", "partitions"), ("windows", "windows"),
            ("candidate_windows", "candidate windows"), ("matcher_calls", "matcher calls"),
            ("work", "matcher work"), ("peak", "peak work in one window"),
            ("matches", "matches"), ("match_seconds", "matching time (s)"))


def charts(check: PrCheck, folder: Path) -> None:
    """``<pattern>_per_month.png`` for every pattern that ran (``PatternDiff.chart``)."""

    for d in check.patterns:
        if d.before is None and d.after is None:
            continue
        path = folder / f"{d.change.name}_per_month.png"
        before_after(d.months, path, f"{d.change.name}: matches per month (by first event)")
        d.chart = path.name


def write_report(check: PrCheck, folder: Path) -> dict[str, Path]:
    """``report.md``, ``report.txt`` and ``summary.json`` in ``folder`` (charts: drawn by
    ``pr_check(charts=folder)``)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {"markdown": folder / "report.md", "text": folder / "report.txt",
           "json": folder / "summary.json"}
    out["markdown"].write_text(markdown(check), encoding="utf-8")
    out["text"].write_text(terminal(check), encoding="utf-8")
    out["json"].write_text(json.dumps(summary(check), indent=2, default=str), encoding="utf-8")
    return out


def _count(side) -> str:
    if side is None:
        return "—"
    if side.status == FAILED:
        return FAILED
    return str(side.row.get("matches", side.matches.num_rows if side.matches else 0))


def _secs(side) -> str:
    if side is None or side.status == FAILED:
        return "—"
    return f"{side.row.get('match_seconds') or 0:.1f}"


def _verdict(d: PatternDiff) -> str:
    if d.problems:
        return "invalid"
    if d.after is not None and d.after.status == FAILED:
        return "fails"
    if d.n_added == 0 and d.n_removed == 0 and d.change.status not in ("added", "removed"):
        return "same matches"
    return "warnings" if d.warnings else "ok"


def summary(check: PrCheck) -> dict:
    """What the report says, for machines (CI gates, the tests)."""
    return {
        "base": check.changes.base_ref, "base_commit": check.changes.base_commit,
        "data": check.data, "ok": check.ok, "seconds": round(check.seconds, 1),
        "patterns": [{
            "name": d.change.name, "change": d.change.status, "verdict": _verdict(d),
            "path": (d.change.head or d.change.base).path,
            "version_before": d.change.base.version if d.change.base else None,
            "version_after": d.change.head.version if d.change.head else None,
            "problems": d.problems, "warnings": d.warnings,
            "matches_before": _n(d.before), "matches_after": _n(d.after),
            "added": d.n_added, "removed": d.n_removed,
            "counters_before": _counters(d.before), "counters_after": _counters(d.after),
            "chart": d.chart} for d in check.patterns],
        "unchanged": [c.name for c in check.changes.patterns if c.status == UNCHANGED
                      and c.base is not None and c.head is not None
                      and c.base.text != c.head.text],
        "models": [{
            "name": m.change.name, "change": m.change.status, "why": m.change.reason,
            "status_before": (m.before or {}).get("status"),
            "status_after": (m.after or {}).get("status"),
            "rows_before": (m.before or {}).get("rows"), "rows_after": (m.after or {}).get("rows"),
            "message": (m.after or {}).get("message"),
            "added": m.n_added, "removed": m.n_removed} for m in check.models],
    }


def _n(side):
    if side is None or side.status == FAILED:
        return None
    return side.row.get("matches")


def _counters(side) -> dict | None:
    if side is None or side.status == FAILED:
        return None
    return {k: side.row.get(k) for k, _ in COUNTERS}


# -- Markdown ------------------------------------------------------------------------------
def _md_cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _when(ts) -> str:
    if isinstance(ts, datetime):
        return ts.strftime("%Y-%m-%d %H:%M")
    return str(ts)[:16]


def describe_match(row: dict, events: dict) -> str:
    """``a = e1 (2014-01-02 10:00, CRP); b = e7 (...)``: a match with its events."""
    parts = []
    for var, ids in row.get("bindings") or []:
        shown = []
        for e in ids:
            ts, label = events.get(e, (None, ""))
            what = ", ".join(x for x in (_when(ts) if ts else "", label) if x)
            shown.append(f"{e} ({what})" if what else e)
        parts.append(f"{var} = {', '.join(shown) or '(none)'}")
    extra = "".join(f", {k} {row[k]}" for k in ("alternative",) if row.get(k) is not None)
    measures = "".join(f"; {k} = {_fmt(v)}" for k, v in (row.get("measures") or {}).items())
    return f"from {_when(row.get('start_ts'))} to {_when(row.get('end_ts'))}{extra}: " \
        + "; ".join(parts) + measures


def headline(check: PrCheck) -> str:
    n_p = len(check.patterns)
    n_m = len(check.models)
    base = f"`{check.changes.base_ref}` ({check.changes.base_commit[:10]})"
    if not n_p and not n_m:
        return f"No pattern or model changes since {base}: nothing to run."
    return (f"{n_p} pattern(s) and {n_m} model(s) changed or affected since {base}; "
            f"{'all checks pass' if check.ok else 'SOME CHECKS FAIL'}.")


def markdown(check: PrCheck) -> str:
    lines = ["# Pattern check", "", headline(check), ""]
    if check.patterns or check.models:
        lines += [f"Runs read {check.data}, in a scratch lake (the real lake is not written). "
                  f"Took {check.seconds:.0f} s.", ""]
    s = summary(check)
    if s["unchanged"]:
        lines += ["Edited without changing what they match (comments, formatting, order): "
                  + ", ".join(f"`{n}`" for n in s["unchanged"]) + ".", ""]
    if check.patterns:
        lines += ["| pattern | change | matches before | after | added | removed | "
                  "matching s before → after | verdict |", "|---|---|---:|---:|---:|---:|---|---|"]
        for d in check.patterns:
            lines.append(f"| `{d.change.name}` | {d.change.status} | {_count(d.before)} | "
                         f"{_count(d.after)} | {d.n_added} | {d.n_removed} | "
                         f"{_secs(d.before)} → {_secs(d.after)} | {_verdict(d)} |")
        lines.append("")
    warned = [(d.change.name, w) for d in check.patterns for w in d.warnings]
    if warned:
        lines += ["## Warnings", ""] + [f"- `{n}`: {_md_cell(w)}" for n, w in warned] + [""]
    for d in check.patterns:
        lines += _md_pattern(d, check.events)
    if check.models:
        lines += _md_models(check.models)
    return "\n".join(lines).rstrip() + "\n"


def _md_pattern(d: PatternDiff, events: dict) -> list[str]:
    c = d.change
    path = (c.head or c.base).path
    lines = [f"## `{c.name}` — {c.status}", ""]
    versions = " → ".join(v for v in (c.base and c.base.version, c.head and c.head.version) if v)
    lines += [f"File `{path}`" + (f", version {versions}" if versions else "") + ".", ""]
    if c.status == "removed":
        lines += [f"The file is removed: `matches_{c.name}` is no longer updated by the "
                  "nightly run (its table stays in the lake until it is dropped).", ""]
    if d.problems:
        lines += ["**Invalid** (not run):", ""] + [f"- {_md_cell(p)}" for p in d.problems] + [""]
        return lines
    for label, side in (("base version", d.before), ("new version", d.after)):
        if side is not None and side.status == FAILED:
            lines += [f"**The {label} failed:** {_md_cell(side.message)}", ""]
    before, after = _counters(d.before), _counters(d.after)
    if before or after:
        lines += ["| | before | after |", "|---|---:|---:|"]
        for key, label in COUNTERS:
            b = "—" if before is None else _fmt(before.get(key))
            a = "—" if after is None else _fmt(after.get(key))
            lines.append(f"| {label} | {b} | {a} |")
        lines.append("")
    if d.chart:
        lines += [f"![matches per month, before and after]({d.chart})", ""]
    for label, n, shown in (("Added", d.n_added, d.added), ("Removed", d.n_removed, d.removed)):
        if n:
            more = f" (the first {len(shown)} by start)" if n > len(shown) else ""
            lines += [f"**{label}: {n} match(es)**{more}", ""]
            lines += [f"- {_md_cell(describe_match(r, events))}" for r in shown] + [""]
    if d.before is not None and d.after is not None and not d.n_added and not d.n_removed \
            and d.after.status != FAILED and d.before.status != FAILED:
        lines += ["The new version publishes exactly the same matches.", ""]
    return lines


def _fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.1f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _md_models(models: list[ModelDiff]) -> list[str]:
    lines = ["## Models", "", "| model | change | why | before | after | rows before | after | "
             "added | removed |", "|---|---|---|---|---|---:|---:|---:|---:|"]
    for m in models:
        b, a = m.before or {}, m.after or {}
        lines.append(f"| `{m.change.name}` | {m.change.status} | {m.change.reason or '—'} | "
                     f"{b.get('status', '—')} | {a.get('status', '—')} | "
                     f"{_fmt(b.get('rows'))} | {_fmt(a.get('rows'))} | {m.n_added} | "
                     f"{m.n_removed} |")
    lines.append("")
    for m in models:
        if (m.after or {}).get("status") == FAILED:
            lines += [f"- `{m.change.name}` fails: {_md_cell(m.after.get('message'))}"]
        for label, n, shown in (("added", m.n_added, m.added), ("removed", m.n_removed,
                                                                  m.removed)):
            if n:
                lines.append(f"- `{m.change.name}`, {n} row(s) {label}, e.g. "
                             + "; ".join(f"`{_md_cell(json.dumps(r, default=str))}`"
                                         for r in shown[:3]))
    return lines + [""]


# -- terminal ------------------------------------------------------------------------------
def terminal(check: PrCheck) -> str:
    """The same facts, short, for the terminal and the CI log."""
    lines = [headline(check)]
    if check.patterns or check.models:
        lines.append(f"data: {check.data}")
    s = summary(check)
    if s["unchanged"]:
        lines.append("no change in what they match: " + ", ".join(s["unchanged"]))
    if check.patterns:
        lines.append(f"\n{'pattern':36} {'change':9} {'before':>7} {'after':>7} {'added':>6} "
                     f"{'removed':>7} {'match s':>13}  verdict")
        for d in check.patterns:
            lines.append(f"{d.change.name:36} {d.change.status:9} {_count(d.before):>7} "
                         f"{_count(d.after):>7} {d.n_added:>6} {d.n_removed:>7} "
                         f"{_secs(d.before) + ' → ' + _secs(d.after):>13}  {_verdict(d)}")
    for d in check.patterns:
        for p in d.problems:
            lines.append(f"invalid: {d.change.name}: {p}")
        for w in d.warnings:
            lines.append(f"warning: {d.change.name}: {w}")
        for label, shown in (("+", d.added[:3]), ("-", d.removed[:3])):
            for r in shown:
                lines.append(f"  {label} {d.change.name}: {describe_match(r, check.events)}")
    for m in check.models:
        b, a = m.before or {}, m.after or {}
        lines.append(f"model {m.change.name} ({m.change.status}; {m.change.reason or 'changed'}):"
                     f" {b.get('status', '—')} → {a.get('status', '—')}, rows "
                     f"{_fmt(b.get('rows'))} → {_fmt(a.get('rows'))}, +{m.n_added} -{m.n_removed}"
                     + (f"; {a['message']}" if a.get("message") else ""))
    return "\n".join(lines) + "\n"


def pytest_filter(names: list[str]) -> str:
    """A ``pytest -k`` expression selecting the example tests of these pattern files."""
    words = [re.sub(r"[^A-Za-z0-9_]", "_", n) for n in names]
    return " or ".join(words)

