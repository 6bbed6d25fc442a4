"""The catalogue's pictures (PNG, matplotlib without a display): a pattern drawn as sets
on a time axis, matches per month, the timeline of a few matches, run history, lineage."""

from __future__ import annotations

import textwrap
from datetime import datetime
from html import escape
from pathlib import Path

from jobs.lake.health import FLAGGED
from jobs.status import SUCCESS


def _pyplot():
    """matplotlib's pyplot without a display, imported on first use (it takes longer to
    import than a small command runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt

COLORS = ["#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b7791f", "#c53030", "#2c7a7b",
          "#97266d"]
GREY = "#718096"


def _save(fig, path: Path) -> Path:
    plt = _pyplot()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=96, bbox_inches="tight")
    plt.close(fig)
    return path


def variable_label(v) -> str:
    return str(v)  # p+, 'p{2,5}', not n{2,}, consecutive c{3}


def own_conditions(alt, name: str) -> list[str]:
    """What the file asks of each event of variable ``name`` (its conditions on one event,
    and on itself: ``w.patient = w.patient``; first ever; its history conditions), as the
    file writes them."""
    out = [str(c) for c in alt.conditions
           if getattr(c, "var", None) == name or getattr(c, "variables", ()) == (name, name)]
    out += ["first ever"] * (name in alt.first_ever)
    out += [f"history: {h}" for h in getattr(alt, "history", ()) if h.anchor == name]
    return out


def _box(title: str, conditions: list[str], width: int = 26) -> str:
    """A variable's box text: its name, then its conditions wrapped (never cut)."""
    lines = [title]
    for c in conditions:
        lines += textwrap.wrap(c, width, subsequent_indent="  ", break_long_words=False)
    return "\n".join(lines)


def _rows(pattern) -> list[tuple[str, list[list[str]]]]:
    """(row label, sets as lists of box texts: each variable with its own conditions,
    negated sets in their place) per alternative."""
    out = []
    for k, alt in enumerate(pattern.alternatives, start=1):
        columns: list[list[str]] = [[_box(("next " if i in alt.next_sets else "")
                                          + variable_label(v), own_conditions(alt, v.name))
                                     for v in s] for i, s in enumerate(alt.sets)]
        for n in sorted(alt.negations, key=lambda n: -1 if n.before is None else n.before,
                        reverse=True):
            at = 0 if n.before is None else n.before + 1
            label = variable_label(n.var)
            label = label.replace("not ", "not next ", 1) if n.next else label
            columns.insert(at, [_box(label, own_conditions(alt, n.var.name))])
        label = f"alternative {k}" if len(pattern.alternatives) > 1 else ""
        out.append((label, columns))
    return out


def relations(pattern) -> list[str]:
    """The conditions between two variables (and on whole matches), as written."""
    return list(dict.fromkeys(
        str(c) for alt in pattern.alternatives for c in alt.conditions
        if len(set(getattr(c, "variables", ()))) > 1))


def pattern_shape(pattern, path: Path) -> Path:
    """Sets as boxes left to right (time runs right), variables inside, negated sets
    hatched, a bracket for ``within``; a window pattern as start -> ... -> termination."""
    plt = _pyplot()
    from matplotlib.patches import FancyBboxPatch

    if pattern.kind == "window":
        rows = [("", [[f"start: {pattern.start}"], ["iteration / filter: buffered events"],
                      [f"termination: {pattern.termination}"]])]
    else:
        rows = _rows(pattern)
    width = max(len(cols) for _, cols in rows)
    lines = max(sum(n.count("\n") + 1 for n in names) for _, cols in rows for names in cols)
    h = max(0.8, 0.22 * lines + 0.3)  # a row's height: its tallest box
    linked = [] if pattern.kind == "window" else relations(pattern)
    extra = 0.25 * len(linked)
    fig, ax = plt.subplots(figsize=(max(5.0, 3.4 * width),
                                    1.3 + (h + 0.4) * len(rows) + extra))
    for r, (label, columns) in enumerate(rows):
        y = (len(rows) - 1 - r) * (h + 0.4)
        if label:
            ax.text(-0.15, y + h / 2, label, ha="right", va="center", fontsize=9, color=GREY)
        for c, names in enumerate(columns):
            negated = names[0].startswith("not ")
            box = FancyBboxPatch((c * 2.8, y), 2.3, h, boxstyle="round,pad=0.05",
                                 facecolor="#edf2f7" if negated else "#ebf8ff",
                                 edgecolor=GREY if negated else COLORS[0],
                                 hatch="//" if negated else None, linewidth=1.2)
            ax.add_patch(box)
            ax.text(c * 2.8 + 1.15, y + h / 2, "\n\n".join(names), ha="center", va="center",
                    fontsize=8)
            if c:
                ax.annotate("", xy=(c * 2.8 - 0.05, y + h / 2),
                            xytext=(c * 2.8 - 0.45, y + h / 2),
                            arrowprops={"arrowstyle": "->", "color": GREY})
    right = width * 2.8 - 0.5
    ax.annotate("", xy=(right, -0.35), xytext=(0, -0.35),
                arrowprops={"arrowstyle": "<->", "color": COLORS[1]})
    ax.text(right / 2, -0.6, f"all within {pattern.within} (time runs to the right)",
            ha="center", va="top", fontsize=9, color=COLORS[1])
    for i, text in enumerate(linked):
        ax.text(0, -1.05 - 0.25 * i, text, ha="left", va="top", fontsize=8, color=GREY)
    ax.set_xlim(-1.6 if any(lbl for lbl, _ in rows) else -0.3, right + 0.3)
    ax.set_ylim(-1.2 - extra, len(rows) * (h + 0.4))
    ax.axis("off")
    return _save(fig, path)


def per_month_svg(counts: list[tuple[str, int]], width: int = 720, height: int = 190) -> str:
    """Matches per month (by first event) as inline SVG written as text: the chart changes
    with every night that publishes, so a PNG per pattern per night would be the
    catalogue's largest cost. Every bar has its count as a tooltip; a label for about
    every twelfth month."""
    if not counts:
        return '<p class="muted">no matches</p>'
    left, right, top, bottom = 44, 10, 14, 40
    w, h = width - left - right, height - top - bottom
    most = max(n for _, n in counts) or 1
    step = w / len(counts)
    every = max(1, len(counts) // 12)
    out = [f'<svg class="months" width="{width}" height="{height}" role="img" '
           f'aria-label="matches per month" xmlns="http://www.w3.org/2000/svg">',
           f'<text x="{left}" y="10" font-size="10">matches per month (by first event)</text>',
           f'<text x="2" y="{top + 8}" font-size="9">{most}</text>']
    for i, (month, n) in enumerate(counts):
        bar = h * n / most
        out.append(f'<rect x="{left + i * step + step * 0.1:.1f}" y="{top + h - bar:.1f}" '
                   f'width="{max(step * 0.8, 0.5):.1f}" height="{bar:.1f}" '
                   f'fill="{COLORS[0]}"><title>{escape(month)}: {n}</title></rect>')
        if i % every == 0:
            out.append(f'<text x="{left + i * step:.1f}" y="{height - 24}" font-size="9">'
                       f'{escape(month)}</text>')
    out += [f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="{GREY}"/>',
            "</svg>"]
    return "\n".join(out)


def before_after(months: list[tuple[str, int, int]], path: Path, title: str) -> Path:
    """Matches per month of two versions of a pattern, side by side (``pr-check``)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 2.8))
    if months:
        x = list(range(len(months)))
        ax.bar([i - 0.2 for i in x], [b for _, b, _ in months], width=0.4, color=GREY,
               label="before (base)")
        ax.bar([i + 0.2 for i in x], [a for _, _, a in months], width=0.4, color=COLORS[0],
               label="after (this change)")
        step = max(1, len(months) // 12)
        ax.set_xticks(x[::step], [m for m, _, _ in months][::step], rotation=45, ha="right",
                      fontsize=8)
        ax.legend(fontsize=8, frameon=False)
    else:
        ax.text(0.5, 0.5, "no matches before or after", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_ylabel("matches")
    ax.set_title(title, fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    return _save(fig, path)


def timeline(shown: list[dict], path: Path) -> Path:
    """One row per match; each bound event a mark at its time since the match's start,
    colored by variable (hours, or days for long matches)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 0.8 + 0.55 * max(1, len(shown))))
    spans = [(m["end"] - m["start"]).total_seconds() for m in shown] or [0]
    unit, div = ("days", 86400.0) if max(spans) > 3 * 86400 else ("hours", 3600.0)
    variables: list[str] = []
    for m in shown:
        for var, *_ in m["events"]:
            if var not in variables:
                variables.append(var)
    for row, m in enumerate(shown):
        y = len(shown) - 1 - row
        xs = [(ts - m["start"]).total_seconds() / div for _, ts, _, _ in m["events"]]
        ax.plot([min(xs), max(xs)], [y, y], color="#cbd5e0", zorder=1)
        for (var, _, _, label), x in zip(m["events"], xs):
            ax.scatter([x], [y], s=60, color=COLORS[variables.index(var) % len(COLORS)],
                       zorder=2, label=var)
            if label:
                ax.annotate(label[:18], (x, y), xytext=(0, 7), textcoords="offset points",
                            fontsize=7, ha="center", color=GREY)
    ax.set_yticks(range(len(shown)), [_day(m["start"]) for m in reversed(shown)], fontsize=8)
    ax.set_xlabel(f"{unit} since the match's first event")
    handles, labels = ax.get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    if seen:
        ax.legend(seen.values(), seen.keys(), title="variable", fontsize=8, loc="upper left",
                  bbox_to_anchor=(1.0, 1.0))
    if not shown:
        ax.text(0.5, 0.5, "no matches", ha="center", va="center", transform=ax.transAxes)
    ax.spines[["top", "right"]].set_visible(False)
    return _save(fig, path)


def _day(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M")


def run_history(runs: list[dict], path: Path) -> Path:
    """Seconds per run (bars, red when failed) and matches published (line)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 2.6))
    if runs:
        xs = range(len(runs))
        ax.bar(xs, [r.get("seconds") or 0 for r in runs],
               color=[COLORS[0] if r["status"] == SUCCESS else COLORS[5] for r in runs])
        ax.set_ylabel("seconds")
        ax.set_xticks(list(xs), [str(r["started_at"])[:10] for r in runs], rotation=45,
                      ha="right", fontsize=7)
        twin = ax.twinx()
        twin.plot(list(xs), [r.get("matches") or 0 for r in runs], color=COLORS[1],
                  marker="o")
        twin.set_ylabel("matches in range", color=COLORS[1])
    else:
        ax.text(0.5, 0.5, "no runs yet", ha="center", va="center", transform=ax.transAxes)
    ax.set_title("runs (red: failed)", fontsize=10)
    return _save(fig, path)


def _polyline(points: list[tuple[float, float]], color: str) -> str:
    xy = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
    return f'<polyline points="{xy}" fill="none" stroke="{color}" stroke-width="1.5"/>'


def _baseline(left: float, y: float, width: float) -> str:
    return f'<line x1="{left}" y1="{y}" x2="{left + width}" y2="{y}" stroke="{GREY}"/>'


def run_history_svg(runs: list[dict], width: int = 720, height: int = 170) -> str:
    """A pattern's runs as inline SVG, written as text (no matplotlib: a year of nights
    redraws every pattern's history every night, and a PNG each cost 0.3 s): seconds per
    run as bars (red when failed), matches in the run's range as a line, every fifth
    logical date under the axis."""
    if not runs:
        return '<p class="muted">no runs yet</p>'
    left, right, top, bottom = 44, 44, 14, 34
    w, h = width - left - right, height - top - bottom
    secs = [float(r.get("seconds") or 0) for r in runs]
    found = [int(r.get("matches") or 0) for r in runs]
    top_s, top_m = max(secs) or 1.0, max(found) or 1
    step = w / len(runs)
    out = [f'<svg class="runs" width="{width}" height="{height}" role="img" '
           f'aria-label="run history" xmlns="http://www.w3.org/2000/svg">',
           f'<text x="{left}" y="10" font-size="10">runs: seconds (bars, red: failed), '
           f'matches in range (line, right axis)</text>']
    for i, (r, v) in enumerate(zip(runs, secs)):
        bar = h * v / top_s
        color = COLORS[0] if r.get("status") == SUCCESS else COLORS[5]
        out.append(f'<rect x="{left + i * step + step * 0.1:.1f}" y="{top + h - bar:.1f}" '
                   f'width="{step * 0.8:.1f}" height="{bar:.1f}" fill="{color}"/>')
        if i % max(1, len(runs) // 8) == 0:
            day = str(r.get("logical_date") or r.get("started_at") or "")[:10]
            out.append(f'<text x="{left + i * step:.1f}" y="{height - 18}" font-size="9">'
                       f'{day}</text>')
    out += [_polyline([(left + (i + 0.5) * step, top + h - h * m / top_m)
                       for i, m in enumerate(found)], COLORS[1]),
            _baseline(left, top + h, w),
            f'<text x="2" y="{top + 8}" font-size="9">{top_s:.1f} s</text>',
            f'<text x="{left + w + 4}" y="{top + 8}" font-size="9" fill="{COLORS[1]}">'
            f'{top_m}</text>', "</svg>"]
    return "\n".join(out)


def lineage(edges: list[tuple[str, str]], path: Path) -> Path:
    """Sources -> pattern tables -> models, as three columns of names joined by lines."""
    plt = _pyplot()
    nodes = list(dict.fromkeys([n for e in edges for n in e]))
    layers = {"source": 0, "pattern": 1, "model": 2}
    columns: dict[int, list[str]] = {0: [], 1: [], 2: []}
    depth = {n: layers[n.split()[0]] for n in nodes}
    for a, b in edges:  # a model that reads a model sits further right
        if b.startswith("model") and a.startswith("model"):
            depth[b] = max(depth[b], depth[a] + 1)
    for n in nodes:
        columns.setdefault(depth[n], []).append(n)
    height = max(len(v) for v in columns.values()) if nodes else 1
    fig, ax = plt.subplots(figsize=(3.2 * len(columns), 0.45 * height + 1))
    pos = {}
    for x, names in columns.items():
        for i, n in enumerate(sorted(names)):
            pos[n] = (x, height - 1 - i * (height / max(len(names), 1)))
    for a, b in edges:
        (x1, y1), (x2, y2) = pos[a], pos[b]
        ax.plot([x1 + 0.05, x2 - 0.05], [y1, y2], color="#cbd5e0", zorder=1)
    for n, (x, y) in pos.items():
        kind, name = n.split(" ", 1)
        ax.text(x, y, name, ha="center", va="center", fontsize=8, zorder=2,
                bbox={"boxstyle": "round", "facecolor": {"source": "#f0fff4", "pattern":
                                                         "#ebf8ff"}.get(kind, "#faf5ff"),
                      "edgecolor": COLORS[layers[kind]]})
    for x, title in zip(range(len(columns)), ["sources", "match tables", "models", "models"]):
        ax.text(x, height + 0.2, title, ha="center", fontsize=10, weight="bold")
    ax.set_xlim(-0.6, len(columns) - 0.4)
    ax.set_ylim(-1, height + 0.8)
    ax.axis("off")
    return _save(fig, path)


def volume_svg(checks: list[dict], width: int = 360, height: int = 120, title: str = "") -> str:
    """A subject's nightly counts (new matches or events) as inline SVG: the band the
    volume rule expected (grey), the counts (a line), the flagged nights (red dots)."""
    if not checks:
        return '<p class="muted">no nights checked yet</p>'
    left, right, top, bottom = 36, 8, 16, 22
    w, h = width - left - right, height - top - bottom
    values = [float(c.get("value") or 0) for c in checks]
    highs = [float(c["high"]) for c in checks if c.get("high") is not None]
    peak = max(values + highs) or 1.0
    step = w / max(len(checks), 1)

    def y(v: float) -> float:
        return top + h - h * v / peak

    out = [f'<svg class="volume" width="{width}" height="{height}" role="img" '
           f'aria-label="nightly volume {title}" xmlns="http://www.w3.org/2000/svg">',
           f'<text x="{left}" y="11" font-size="10">{title}</text>']
    for i, c in enumerate(checks):
        if c.get("low") is not None and c.get("high") is not None:
            out.append(f'<rect x="{left + i * step:.1f}" y="{y(float(c["high"])):.1f}" '
                       f'width="{step:.1f}" height="{y(float(c["low"])) - y(float(c["high"])):.1f}" '
                       f'fill="#e2e8f0"/>')
    out.append(_polyline([(left + (i + 0.5) * step, y(v)) for i, v in enumerate(values)],
                         COLORS[0]))
    for i, (c, v) in enumerate(zip(checks, values)):
        if c.get("status") in FLAGGED:
            out.append(f'<circle cx="{left + (i + 0.5) * step:.1f}" cy="{y(v):.1f}" r="3" '
                       f'fill="{COLORS[5]}"><title>{c["logical_date"]}: {v:,.0f}</title></circle>')
    out += [_baseline(left, top + h, w),
            f'<text x="2" y="{top + 8}" font-size="9">{peak:,.0f}</text>',
            f'<text x="{left}" y="{height - 6}" font-size="9">{checks[0]["logical_date"]}</text>',
            f'<text x="{left + w - 60}" y="{height - 6}" font-size="9">'
            f'{checks[-1]["logical_date"]}</text>', "</svg>"]
    return "\n".join(out)


def funnel_svg(rows: list, width: int = 720) -> str:
    """A pattern's funnel (its latest run's ``funnels`` rows) as inline SVG: a bar per
    step, as wide as the windows that reached it, with its partitions, and under each
    bar what stopped the windows that got no further."""
    if not rows:
        return '<p class="muted">no funnel recorded yet (the next run counts it)</p>'
    left, bar, gap = 220, 18, 8
    peak = max(r.windows for r in rows) or 1
    lines = [len(r.stops) for r in rows]
    height = 8 + sum(bar + gap + 13 * min(n, 3) for n in lines)
    out = [f'<svg class="funnel" width="{width}" height="{height}" role="img" '
           f'aria-label="funnel" xmlns="http://www.w3.org/2000/svg">']
    y = 4
    for r in rows:
        w = (width - left - 10) * r.windows / peak
        alt = f"alt {r.alternative}, " if r.alternative else ""
        neg = f" ({escape(r.negations)})" if r.negations else ""
        out.append(f'<text x="2" y="{y + 13}" font-size="11">{alt}step {r.step}: '
                   f'{escape(r.variables)}{neg}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{max(w, 1):.1f}" height="{bar}" '
                   f'fill="{COLORS[0]}"><title>{r.windows:,} windows, {r.partitions:,} '
                   f'partitions</title></rect>')
        inside = w > width - left - 150  # the label fits inside the bar, not after it
        x = left + w - 4 if inside else left + max(w, 1) + 4
        out.append(f'<text x="{x:.1f}" y="{y + 13}" font-size="10" '
                   f'text-anchor="{"end" if inside else "start"}" '
                   f'fill="{"#fff" if inside else "#222"}">{r.partitions:,} partitions, '
                   f'{r.windows:,} windows</text>')
        y += bar + 4
        for label, n in sorted(r.stops.items(), key=lambda kv: -kv[1])[:3]:
            out.append(f'<text x="{left}" y="{y + 9}" font-size="9" fill="{COLORS[5]}">'
                       f'stopped by {escape(label)}: {n:,}</text>')
            y += 13
        y += gap - 4
    out.append("</svg>")
    return "\n".join(out)


def funnel_history_svg(nights: list[tuple[str, list]], width: int = 720, height: int = 150
                       ) -> str:
    """The windows that reached each step, night by night (one line per step of the
    first alternative): where a pattern's funnel narrows over time."""
    nights = [(d, [r for r in rows if (r.alternative or 1) == 1]) for d, rows in nights]
    nights = [(d, rows) for d, rows in nights if rows]
    if len(nights) < 2:
        return '<p class="muted">fewer than two nights counted yet</p>'
    left, right, top, bottom = 40, 90, 10, 22
    w, h = width - left - right, height - top - bottom
    steps = max(len(rows) for _, rows in nights)
    peak = max(r.windows for _, rows in nights for r in rows) or 1
    dx = w / (len(nights) - 1)
    out = [f'<svg class="funnel-history" width="{width}" height="{height}" role="img" '
           f'aria-label="funnel over time" xmlns="http://www.w3.org/2000/svg">']
    for k in range(steps):
        points = [(left + i * dx, top + h - h * rows[k].windows / peak)
                  for i, (_, rows) in enumerate(nights) if k < len(rows)]
        color = COLORS[k % len(COLORS)]
        out.append(_polyline(points, color))
        out.append(f'<text x="{left + w + 4}" y="{points[-1][1] + 3:.1f}" font-size="9" '
                   f'fill="{color}">step {k + 1}</text>')
    out += [_baseline(left, top + h, w), f'<text x="2" y="{top + 8}" font-size="9">{peak:,}</text>',
            f'<text x="{left}" y="{height - 6}" font-size="9">{nights[0][0]}</text>',
            f'<text x="{left + w - 60}" y="{height - 6}" font-size="9">{nights[-1][0]}</text>',
            "</svg>"]
    return "\n".join(out)


def automaton_svg(states: list[tuple[int, str]], edges: list[tuple[int, int]],
                  accepting: set[int], width_per_state: int = 86) -> str:
    """A row pattern's automaton (``rowpattern.program.automaton``) as inline SVG: its
    states left to right (a double ring: a match may end there), an arrow per transition
    labelled with the variable the row takes (forward arrows above, back arrows below)."""
    n = len(states)
    width, mid, r = 30 + n * width_per_state, 110, 18
    x = {k: 30 + k * width_per_state for k in range(n)}
    out = [f'<svg class="automaton" width="{width}" height="220" role="img" '
           f'aria-label="automaton" xmlns="http://www.w3.org/2000/svg">',
           '<defs><marker id="arrow" markerWidth="8" markerHeight="8" refX="7" refY="4" '
           'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#4a5568"/></marker></defs>']
    for a, b in edges:
        label = escape(states[b][1])
        if a == b:  # a loop on itself
            out.append(f'<path d="M{x[a] - 8},{mid - r} C{x[a] - 30},{mid - 70} {x[a] + 30},'
                       f'{mid - 70} {x[a] + 8},{mid - r}" fill="none" stroke="#4a5568" '
                       f'marker-end="url(#arrow)"/><text x="{x[a]}" y="{mid - 58}" '
                       f'font-size="10" text-anchor="middle">{label}</text>')
            continue
        above = b > a
        lift = min(90, 18 + 14 * abs(b - a)) * (-1 if above else 1)
        y0 = mid - r if above else mid + r
        cx = (x[a] + x[b]) / 2
        out.append(f'<path d="M{x[a]},{y0} Q{cx},{mid + 2 * lift} {x[b]},{y0}" fill="none" '
                   f'stroke="{"#4a5568" if above else COLORS[1]}" marker-end="url(#arrow)"/>'
                   f'<text x="{cx}" y="{mid + lift + (-4 if above else 12)}" font-size="10" '
                   f'text-anchor="middle">{label}</text>')
    for k, (_, name) in enumerate(states):
        out.append(f'<circle cx="{x[k]}" cy="{mid}" r="{r}" fill="#fff" stroke="#2d3748"/>')
        if k in accepting:
            out.append(f'<circle cx="{x[k]}" cy="{mid}" r="{r - 4}" fill="none" '
                       f'stroke="#2d3748"/>')
        out.append(f'<text x="{x[k]}" y="{mid + 4}" font-size="10" text-anchor="middle">'
                   f'{escape(name if k else "▶")}</text>')
    out.append("</svg>")
    return "\n".join(out)
