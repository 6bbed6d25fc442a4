"""Benchmark of the lazy match-window strategy (match-window paper, section 6.1).

Pseq = <{v1}, {v2}, ..., {vk}> and Pset = <{v1, ..., vk}>, k = 1..6, each variable bound
to one event type of the BPI 2011 hospital log, all events of one patient, τ = 10 days
(the paper's Onco setting). For each k a few patterns are drawn at random (fixed seed) from
the most frequent event types. Every pattern runs on the same slice of the log with

* eager    SESExec over the whole stream, an instance started at every event;
* baseline match windows, A called for every window, no pruning;
* f, fp, fpc  + filtering (Theorem 1), + partitioning (Def. 6), + necessary conditions.

With ``--matcher zstream`` the same patterns run with ZStream (all matches): baseline, f,
fp, fpc with ZStream's plan, and fpc with the left-deep plan (``fpc-ld``; best of five
runs against the best of five of fpc, to compare the plans on equal terms; the table says
how many patterns got the same tree from both generators).

All configurations must return identical matches (checked). Throughput = events / second;
factors are relative to the baseline, as in the paper's Figs. 6-7. Output: a Markdown table
on stdout and in bench/out/<matcher>_windows.md, raw figures in .json, and a PNG plot.

    python bench/match_windows.py [--matcher ses|zstream] [--events N] [--per-k 3] [--kmax 6]
        [--kinds Pseq,Pset,Pneg,Pbound] [--name SUFFIX]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from jobs.core.engine.batches import MatchStats  # noqa: E402
from jobs.core.engine.columns import from_events  # noqa: E402
from jobs.core.engine.options import MatchOptions  # noqa: E402
from jobs.core.engine.runtime import compile_pattern, execute  # noqa: E402
from jobs.core.language.events import Event  # noqa: E402
from jobs.core.language.patternfile import parse_pattern  # noqa: E402

HOSPITAL = ROOT.parent / "shared" / "data" / "real" / "bpi2011_hospital.parquet"
CONFIGS = {
    "ses": {
        "eager": MatchOptions(matcher="ses", strategy="eager"),
        "baseline": MatchOptions(matcher="ses", filter=False, partition=False, conditions=False),
        "f": MatchOptions(matcher="ses", filter=True, partition=False, conditions=False),
        "fp": MatchOptions(matcher="ses", filter=True, partition=True, conditions=False),
        "fpc": MatchOptions(matcher="ses"),
    },
    "zstream": {
        "baseline": MatchOptions(matcher="zstream", filter=False, partition=False,
                                 conditions=False),
        "f": MatchOptions(matcher="zstream", filter=True, partition=False, conditions=False),
        "fp": MatchOptions(matcher="zstream", filter=True, partition=True, conditions=False),
        "fpc": MatchOptions(matcher="zstream", plan="zstream"),
        "fpc-ld": MatchOptions(matcher="zstream", plan="left-deep"),
    },
}
REPEATS = {"fpc": 5, "fpc-ld": 5}  # best of n, where two configurations are compared closely


def load_hospital(n_events: int, start: str) -> list[Event]:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from jobs.core.language.events import events_from_arrow, parse_ts

    table = pq.read_table(HOSPITAL, columns=["patient", "event_type", "timestamp"])
    table = table.append_column("row", pa.array(range(table.num_rows)))
    table = table.sort_by([("timestamp", "ascending"), ("row", "ascending")])
    ts = table.column("timestamp").cast("timestamp[ns]").cast("int64")
    table = table.filter(pc.greater_equal(ts, parse_ts(start))).slice(0, n_events)
    ids = pa.array([f"h{r:06d}" for r in table.column("row").to_pylist()])
    table = table.drop_columns(["row"]).append_column("event_id", ids)
    return events_from_arrow(table, time_column="timestamp")


def make_pattern(kind: str, types: list[str], tau: str, matcher: str = "ses"):
    """Pseq, Pset; Pneg = Pseq with a negated variable (one more type, same patient)
    after the first set; Pbound = Pseq whose first variable binds 2 to 4 events."""
    if kind == "Pneg":
        types, negated = types[:-1], types[-1]
    names = [f"v{i + 1}" for i in range(len(types))]
    sets = [[n] for n in names] if kind != "Pset" else [names]
    if kind == "Pbound":
        sets[0] = ["'v1{2,4}'"]
    if kind == "Pneg":
        sets.insert(1, ["not n"])
    conds = [f"{n}.event_type = '{t}'" for n, t in zip(names, types)]
    conds += [f"{a}.patient = {b}.patient" for a, b in zip(names, names[1:])]
    if kind == "Pneg":
        conds += [f"n.event_type = '{negated}'", "n.patient = v1.patient"]
    text = (f"name: bench\nsource: hospital\nwithin: {tau}\nsets: "
            f"[{', '.join('[' + ', '.join(s) + ']' for s in sets)}]\n"
            + "conditions:\n" + "".join(f'  - "{c}"\n' for c in conds) + f"matcher: {matcher}\n")
    return parse_pattern(text, "<bench>")


def frequent_types(events: list[Event], top: int) -> list[str]:
    counts: dict[str, int] = {}
    for e in events:
        counts[e.attrs["event_type"]] = counts.get(e.attrs["event_type"], 0) + 1
    return [t for t, _ in sorted(counts.items(), key=lambda kv: -kv[1])[:top]]


def warm_up(events: list[Event]) -> None:
    """Load the compiled kernels once (start-up, not matching time)."""
    for matcher in ("ses", "zstream"):
        p = make_pattern("Pset", ["x", "y"], "1d", matcher)
        c = compile_pattern(p)
        for options in (MatchOptions(), MatchOptions(strategy="eager")):
            list(execute(c, from_events(events[:50], c.attributes), options))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--matcher", choices=("ses", "zstream"), default="ses")
    ap.add_argument("--events", type=int, default=20000, help="slice length (events)")
    ap.add_argument("--start", default="2006-01-01", help="slice start date")
    ap.add_argument("--per-k", type=int, default=3, help="random patterns per k and kind")
    ap.add_argument("--kmax", type=int, default=6)
    ap.add_argument("--tau", default="10d")
    ap.add_argument("--top", type=int, default=20, help="draw types from the N most frequent")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--kinds", default="Pseq,Pset",
                    help="comma-separated: Pseq, Pset, Pneg (negation), Pbound (Kleene bounds)")
    ap.add_argument("--name", default="", help="suffix of the output files")
    ap.add_argument("--out", default=str(ROOT / "bench" / "out"))
    args = ap.parse_args(argv)

    events = load_hospital(args.events, args.start)
    warm_up(events)
    types = frequent_types(events, args.top)
    rng = random.Random(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"hospital log slice: {len(events)} events from {args.start}, τ = {args.tau}, "
          f"{args.per_k} random patterns per k", file=sys.stderr)
    results = []
    for k in range(1, args.kmax + 1):
        for kind in args.kinds.split(","):
            if kind == "Pbound" and k < 2 and args.matcher == "zstream":
                continue  # one variable, no patient link: every 2-4 subset of a type's events
            for j in range(args.per_k):
                extra = 1 if kind == "Pneg" else 0
                pattern = make_pattern(kind, rng.sample(types, k + extra), args.tau, args.matcher)
                row = {"kind": kind, "k": k, "pattern": j, "configs": {}}
                compiled = compile_pattern(pattern)
                cols = from_events(events, compiled.attributes)  # columns once, as phase 2
                reference = None
                for name, options in CONFIGS[args.matcher].items():
                    seconds = float("inf")
                    for _ in range(REPEATS.get(name, 3)):
                        st = MatchStats()
                        t0 = time.perf_counter()
                        batches = list(execute(compiled, cols, options, st))
                        seconds = min(seconds, time.perf_counter() - t0)
                    stats = st.as_dict()
                    keyset = {(tuple(b.rows[b.offsets[i]:b.offsets[i + 1]]),
                               tuple(b.variables[b.offsets[i]:b.offsets[i + 1]]))
                              for b in batches for i in range(len(b))}
                    if reference is None:
                        reference = keyset
                    elif keyset != reference:
                        raise SystemExit(f"{kind} k={k} #{j}: {name} differs from the first")
                    stats["seconds"] = seconds
                    stats["throughput"] = len(events) / seconds
                    row["configs"][name] = stats
                results.append(row)
                c = row["configs"]
                print(f"  {kind} k={k} #{j}: matches={c['fpc']['matches']} " + " ".join(
                    f"{n}={c[n]['seconds']:.3f}s" for n in c), file=sys.stderr, flush=True)
    table = summarize(results, len(events), args.matcher)
    print(table)
    stem = f"{args.matcher}_windows{args.name}"
    (out / f"{stem}.md").write_text(table + "\n")
    (out / f"{stem}.json").write_text(json.dumps(results, indent=1))
    plot(results, out / f"{stem}.png", args.matcher)
    print(f"\nwritten: {out}/{stem}.md, .json, .png", file=sys.stderr)
    return 0


def summarize(results, n_events: int, matcher: str) -> str:
    zs = matcher == "zstream"
    head = ("| pattern | k | baseline ev/s | f | fp | fpc | ZStream plan / left-deep (fpc) "
            "| windows (base → fpc) | calls of A (base → fpc) | peak partial matches (base → fpc) "
            "| largest window (base → fpc) |") if zs else (
            "| pattern | k | baseline ev/s | f | fp | fpc | fpc/eager | windows (base → fpc) "
            "| calls of A (base → fpc) | peak instances (eager → fpc) "
            "| largest window (base → fpc) |")
    lines = [f"{matcher}: throughput factors over the baseline (mean throughput of the patterns "
             f"per row), {n_events} hospital events.", "", head,
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple, list] = {}
    for r in results:
        groups.setdefault((r["kind"], r["k"]), []).append(r["configs"])
    for (kind, k), cs in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        def thr(name, cs=cs):
            return statistics.mean(c[name]["throughput"] for c in cs)

        def tot(name, key, cs=cs):
            return sum(c[name][key] for c in cs)

        def peak(name, key, cs=cs):
            return max(c[name].get(key, 0) for c in cs)

        base = thr("baseline")
        if zs:
            same = sum(c["fpc"]["plan"] == c["fpc-ld"]["plan"] for c in cs)
            work = tot("fpc-ld", "work") / max(tot("fpc", "work"), 1)
            versus = (f"{thr('fpc') / thr('fpc-ld'):.2f}× time, {work:.2f}× fewer partial "
                      f"matches ({same}/{len(cs)} same tree)")
            peaks = f"{peak('baseline', 'peak'):,} → {peak('fpc', 'peak'):,}"
        else:
            versus = f"{thr('fpc') / thr('eager'):.1f}×"
            peaks = f"{peak('eager', 'peak'):,} → {peak('fpc', 'peak'):,}"
        lines.append(
            f"| {kind} | {k} | {base:,.0f} | {thr('f') / base:.1f}× | {thr('fp') / base:.1f}× "
            f"| {thr('fpc') / base:.1f}× | {versus} "
            f"| {tot('baseline', 'windows'):,} → {tot('fpc', 'windows'):,} "
            f"| {tot('baseline', 'matcher_calls'):,} → {tot('fpc', 'matcher_calls'):,} "
            f"| {peaks} | {peak('baseline', 'max_window'):,} → {peak('fpc', 'max_window'):,} |")
    return "\n".join(lines)


def plot(results, path: Path, matcher: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(dict.fromkeys(r["kind"] for r in results))
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.5 * len(kinds), 4), sharey=True,
                             squeeze=False)
    axes = axes[0]
    for ax, kind in zip(axes, kinds):
        ks = sorted({r["k"] for r in results if r["kind"] == kind})
        other = ("fpc-ld", "x--") if matcher == "zstream" else ("eager", "x--")
        for name, style in (("f", "o-"), ("fp", "s-"), ("fpc", "^-"), other):
            ys = []
            for k in ks:
                cs = [r["configs"] for r in results if r["kind"] == kind and r["k"] == k]
                base = statistics.mean(c["baseline"]["throughput"] for c in cs)
                ys.append(statistics.mean(c[name]["throughput"] for c in cs) / base)
            ax.plot(ks, ys, style, label=name)
        ax.set_yscale("log")
        ax.set_title(f"{kind}: throughput / baseline ({matcher}, hospital log)")
        ax.set_xlabel("k (variables)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("factor (log)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
