#!/usr/bin/env python3
"""The performance figures of docs/performance.md, made from a committed results file.

    bench/readme.py write [RESULTS]   rewrite docs/performance.md's generated blocks (make bench-readme)
    bench/readme.py check             fail if docs/performance.md and its results file disagree
                                      (make check-bench-readme, part of make test)

`make bench` (a complete full run) writes bench/results/MACHINE.json. `write`
takes RESULTS, or BENCH_RESULTS, or else the newest complete run under
bench/results/ (by the date it records), and rewrites every block of docs/performance.md
between `<!-- bench-readme:begin NAME ... -->` and `<!-- bench-readme:end NAME -->`;
each begin marker names the results file it came from. `check` makes the same
blocks from that file and fails on any difference; it also prints a notice
(not a failure) when the code measured (src/, bench/) has changed since the
commit the results record. Python 3 standard library only.
"""

import difflib
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE_PATH = os.path.join(ROOT, "docs", "performance.md")
# How messages name the page.
PAGE = "docs/performance.md"
RESULTS_DIR = os.path.join(ROOT, "bench", "results")
# What a run measures, and what under it is not measured code (the bench's
# provenance module keeps the same list).
MEASURED = ["src", "bench"]
NOT_MEASURED = [":(exclude)bench/results", ":(exclude)bench/README.md", ":(exclude)bench/readme.py"]

BEGIN = re.compile(
    r"<!-- bench-readme:begin (?P<name>[a-z-]+): made by make bench-readme from (?P<file>\S+); edit bench/readme.py, not this block -->\n"
)


class Missing(Exception):
    """A figure the results file does not have."""


# --- formatting, as the bench prints it -------------------------------------


def human_ns(ns):
    """A duration in nanoseconds, as the bench's tables show it."""
    v = max(float(ns), 0.0)
    if v < 1e3:
        return f"{v:.0f} ns"
    if v < 1e6:
        return f"{v / 1e3:.1f} µs"
    if v < 1e9:
        ms = v / 1e6
        return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms"
    return f"{v / 1e9:.2f} s"


def us(x):
    return human_ns(x * 1e3)


def ms(x):
    return human_ns(x * 1e6)


def secs(x):
    return human_ns(x * 1e9)


def fraction(x):
    return f"{x:.3f}" if x < 0.1 else f"{x:.2f}"


def pct(x):
    return f"{x * 100:.1f} %"


def count(n):
    return f"{n:,.0f}"


def bold(text, yes=True):
    return f"**{text}**" if yes and text not in ("", "—") else text


# --- reading the results ----------------------------------------------------


def pick(rows, **keys):
    """The one row of `rows` whose fields equal `keys`."""
    for row in rows:
        if all(row.get(k) == v for k, v in keys.items()):
            return row
    raise Missing(f"no row with {keys}")


def target(results, what, mode):
    """The bench's targets `what` for `mode`: each bound, and met or not."""
    found = []
    for t in results.get("targets", []):
        if t["what"] == what and t["mode"] == mode:
            met = {True: "met", False: "missed", None: "not measured"}[t["met"]]
            text = f"{t['target']}: {met}"
            if text not in found:
                found.append(text)
    if not found:
        raise Missing(f"no target {what!r} for {mode}")
    return "; ".join(found)


def target_named(results, names, mode):
    """`target` under the first of `names` the results file has (a target renamed since)."""
    for name in names[:-1]:
        try:
            return target(results, name, mode)
        except Missing:
            pass
    return target(results, names[-1], mode)


def targets(results, whats, mode):
    return "; ".join(target(results, w, mode) for w in whats)


SQLITE_MODES = [
    ("immediate", "busy handler (baseline)"),
    ("queue-poll", "driver protocol, Poll (baseline)"),
    ("queue-handoff", "hand-off (default)"),
]


def run_line(results, file):
    m = results["meta"]
    commit = m.get("commit") or "unknown"
    changed = [p for p, c in (m.get("uncommitted_changes") or {}).items() if c]
    load = lambda s: " ".join((s or "").split()[:3])
    server = ((m.get("postgres") or {}).get("server") or "not measured").split(" on ")[0]
    text = (
        f"Figures from `{os.path.relpath(file, ROOT)}`: a {m['run']} `make bench` run of commit "
        f"`{commit[:12]}`"
        + (f" with uncommitted changes in {', '.join(p + '/' for p in changed)}" if changed else "")
        + f", {m['date'].replace('T', ' ').replace('Z', ' UTC')}, on {m['cores']} cores ({m['cpu']}), "
        f"SQLite {m['sqlite']['sqlite_version']} ({m['sqlite']['journal_mode'].upper()}, "
        f"synchronous={m['sqlite']['synchronous'].upper()}), {server}; load average "
        f"{load(m['load_before'])} at its start and {load(m['load_after'])} at its end; "
        f"it took {m['elapsed_s'] / 60:.1f} minutes."
    )
    return text


def sqlite_block(r):
    s = r["scenarios"]
    s1 = s["s1_300ms_transactions"]
    s2 = s["s2_publishes"]
    s3 = s["s3_short_transactions"]
    alt = s["s3_alternated"]
    s4 = s["s4_handoff_latency"]
    hot = s["s5_hot_loop"]
    mixed = s["s8_mixed"]
    top = alt["writers"]
    s3_top = {m: pick(s3["rows"], writers=top, mode=m) for m, _ in SQLITE_MODES}
    rows = []

    def row(label, cells, goal):
        cells = [bold(c, m == "queue-handoff") for (m, _), c in zip(SQLITE_MODES, cells)]
        rows.append(f"| {label} | " + " | ".join(cells) + f" | {goal} |")

    n1 = s1["transactions"]
    s1m = {m: pick(s1["modes"], mode=m) for m, _ in SQLITE_MODES}
    row(
        f"{n1} transactions of 300 ms started together: total ÷ Σ held (the sum of each one's held time)",
        [f"{s1m[m]['total_over_held_sum']:.5f}" for m, _ in SQLITE_MODES],
        target(r, "S1 total ÷ Σ held", "queue-handoff"),
    )
    gap = lambda d: "—" if d["n"] == 0 else f"{us(d['p50_us'])} / {us(d['p99_us'])}"
    row(
        "the same: commit returned → next BEGIN returned, p50 / p99",
        [gap(s1m[m]["release_to_start"]) for m, _ in SQLITE_MODES],
        targets(
            r,
            ["S1 commit returned → next BEGIN returned p50", "S1 commit returned → next BEGIN returned p99"],
            "queue-handoff",
        ),
    )
    for procs in sorted({x["processes"] for x in s2}):
        deferred = pick(s2, processes=procs, mode="deferred")
        cells = []
        for m, _ in SQLITE_MODES:
            x = pick(s2, processes=procs, mode=m)
            cells.append(f"{count(x['committed'])}, {secs(x['total_s'])}")
        row(
            f"{procs} processes × 3 publishes: committed, total time (deferred BEGIN: "
            f"{count(deferred['committed'])} of {count(deferred['publishes'])})",
            cells,
            target(r, f"S2 nothing lost, {procs} processes × 3", "queue-handoff"),
        )
    rounds = len(pick(alt["rows"], mode="queue-handoff")["ratios"])
    alt_cell = lambda m: "—" if m == "queue-poll" else fraction(pick(alt["rows"], mode=m)["median"])
    row(
        f"one-row WAL transactions, {top} processes, alternated rounds: each {alt['duration_s']:.0f} s run "
        f"÷ the serial runs just before and after it, median of {rounds}",
        [alt_cell(m) for m, _ in SQLITE_MODES],
        target_named(
            r,
            [
                f"S3 {top} writers alternated: ÷ serial runs just before and after (median)",
                f"S3 {top} writers ÷ serial runs just before and after (alternated, median)",
            ],
            "queue-handoff",
        ),
    )
    row(
        f"one-row WAL transactions, {top} processes, one {s3['duration_s']:.0f} s run each (not the alternated runs): "
        f"÷ the best serial run of the scenario",
        [fraction(s3_top[m]["over_serial"]) for m, _ in SQLITE_MODES],
        "",
    )
    row(
        f"that {s3['duration_s']:.0f} s run: per-writer commits, worst from mean",
        [pct(s3_top[m]["per_writer"]["worst_from_mean"]) for m, _ in SQLITE_MODES],
        target(r, f"S3 {top} writers: worst commit count from mean", "queue-handoff"),
    )
    row(
        f"that {s3['duration_s']:.0f} s run: longest wait (longest single transaction)",
        [f"{ms(s3_top[m]['longest_wait_ms'])} ({ms(s3_top[m]['longest_txn_ms'])})" for m, _ in SQLITE_MODES],
        target(r, f"S3 {top} writers longest wait", "queue-handoff"),
    )
    source = f"S3 {top} writers, one-row"
    row(
        f"that {s3['duration_s']:.0f} s run: commit returned → next BEGIN returned, p50 / p99",
        [gap(pick(s4, source=source, mode=m)["gaps"]) for m, _ in SQLITE_MODES],
        targets(
            r,
            [
                f"S4 commit returned → next BEGIN returned p50 (S3@{top})",
                f"S4 commit returned → next BEGIN returned p99 (S3@{top})",
            ],
            "queue-handoff",
        ),
    )
    hot_rows = {
        "immediate": pick(hot, hot="immediate", interactive="immediate"),
        "queue-poll": pick(hot, hot="queue-poll", interactive="queue-poll"),
        "queue-handoff": pick(hot, hot="queue-handoff", interactive="queue-handoff"),
    }
    row(
        "interactive writer against a commit-begin hot loop, p99 wait",
        [ms(hot_rows[m]["interactive_waits"]["p99_us"] / 1e3) for m, _ in SQLITE_MODES],
        target(r, "S5 interactive p99 wait vs hot loop", "queue-handoff"),
    )
    rows.append(
        "| mixed hand-off, Poll and plain-`flock()` writers on one database: overlapping turns | | | "
        f"**{count(mixed['overlapping'])} of {count(mixed['turns'])}**, "
        f"{'all committed' if mixed['all_committed'] else 'NOT all committed'}, {count(mixed['lost'])} rows lost | "
        f"{target(r, 'Mixed writers exclude each other and all commit', 'handoff+poll+flock')} |"
    )

    early = []
    for m, label in SQLITE_MODES:
        counts = []
        for source, name in [("S1 300 ms transactions", "300 ms transactions"), (source, f"{top}-writer run")]:
            x = pick(s4, source=source, mode=m)
            counts.append(f"{x['next_began_before_commit_returned']} of {x['gaps']['n']} ({name})")
        early.append(f"{label.split(' (')[0]} {', '.join(counts)}")
    serials = s3["serial_runs"]
    handoff = pick(alt["rows"], mode="queue-handoff")
    busy = pick(alt["rows"], mode="immediate")
    out = [
        "| scenario | " + " | ".join(label for _, label in SQLITE_MODES) + " | target (hand-off) |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "How to read it:",
        "",
        "- **total ÷ Σ held**: from the shared start to the last commit, divided by the sum of each "
        "committed transaction's held time (BEGIN returned to commit returned): 1 means no time "
        "lost between turns. Against a separate run of the same transactions in one process "
        "(" + secs(s1["serial_run_s"]) + "): " + ", ".join(
            f"{label.split(' (')[0]} {s1m[m]['total_over_serial_run']:.4f}" for m, label in SQLITE_MODES
        ) + ".",
        "- **commit returned → next BEGIN returned**: starts once a writer's `commit()` call has "
        "returned, not at the unlock inside it, and counts only where the next writer was already "
        "waiting; a next `BEGIN` that returned before the previous `commit()` call did (the "
        "committer descheduled between its unlock and its clock read) counts as 0. Counted as 0: "
        + "; ".join(early)
        + ".",
        f"- **÷ the serial runs just before and after** (alternated rounds): {rounds} rounds of serial, "
        f"hand-off and busy handler, {alt['duration_s']:.0f} s each; per round, hand-off "
        + " · ".join(fraction(x) for x in handoff["ratios"])
        + ", busy handler "
        + " · ".join(fraction(x) for x in busy["ratios"])
        + "; the serial runs made "
        + " · ".join(count(x) for x in alt["serial_commits_per_s"])
        + " commits/s.",
        f"- **÷ the best serial run of the scenario**: a different, single {s3['duration_s']:.0f} s run at "
        f"{top} writers, divided by the best of {len(serials)} serial runs spread over the scenario "
        f"({count(min(serials))} to {count(max(serials))} commits/s; the best is the strictest "
        "baseline), not the alternated runs with another denominator.",
        "- Every column is one mode's own run; the driver's polling protocol was not run in the "
        "alternated rounds (—).",
    ]
    return "\n".join(out)


def sqlite_facts(r):
    """The figures the explanations below the table rely on."""
    s = r["scenarios"]
    s3 = s["s3_short_transactions"]
    top = s["s3_alternated"]["writers"]
    dur = s3["duration_s"]
    busy = pick(s3["rows"], writers=top, mode="immediate")
    poll = pick(s3["rows"], writers=top, mode="queue-poll")
    hand = pick(s3["rows"], writers=top, mode="queue-handoff")
    t = hand["turns"]
    hand_all = [x for x in s3["rows"] if x["mode"] == "queue-handoff" and x["writers"] > 1]
    serial_longest = max(x["longest_txn_ms"] for x in s3["rows"] if x["mode"] == "serial")
    alt_serial = s["s3_alternated"]["serial_commits_per_s"]
    all_serial = s3["serial_runs"] + alt_serial
    return "\n".join(
        [
            "Measured in the same run:",
            "",
            f"- Busy handler, {top} writers for {dur:.0f} s: one writer made "
            f"{count(busy['per_writer']['min'])} commits while another made "
            f"{count(busy['per_writer']['max'])}; the longest wait was {ms(busy['longest_wait_ms'])}.",
            f"- Driver protocol (Poll), {top} writers: {poll['commits_per_s'] / top:.1f} commits/s per "
            f"writer; the longest wait was {ms(poll['longest_wait_ms'])}.",
            f"- Hand-off, {top} writers: {count(t['kept'])} turns kept within a slice "
            f"({us(t['kept_gap_us'])} between turns, {us(t['kept_hold_us'])} per turn) and "
            f"{count(t['passed'])} passed on to the next writer ({us(t['passed_gap_us'])} between "
            f"turns, {us(t['passed_hold_us'])} for the first turn); hand-overs took "
            f"{pct(t['passed_gap_share'])} of the run; per-writer commits within "
            f"{pct(hand['per_writer']['worst_from_mean'])} of the mean.",
            f"- Hand-off from {min(x['writers'] for x in hand_all)} to {max(x['writers'] for x in hand_all)} "
            f"writers, each {dur:.0f} s run ÷ the best serial run: "
            + ", ".join(f"{fraction(x['over_serial'])} ({x['writers']})" for x in hand_all)
            + ".",
            f"- The serial runs' longest single transaction: {ms(serial_longest)}; the serial rate "
            f"ranged from {count(min(all_serial))} to {count(max(all_serial))} commits/s over the "
            "scenario.",
        ]
    )


PG_WRITERS = [
    ("psycopg", "psycopg 3 by hand (baseline)"),
    ("python", "Python `writerlock.postgres` `write()`"),
    ("c", "C `wl_pg_write_begin` + `wl_pg_exec` + `wl_pg_commit`"),
    ("rust", "Rust `writerlock::pg` `write()`"),
]


def pg_block(r):
    s6 = r["scenarios"]["s6_pg_writes"]
    clients = s6["writers"][0]["clients"] if s6["writers"] else [1, 4, 16]
    out = [
        f"| writer ({s6['rounds']} alternated rounds of {s6['duration_s']:.0f} s, median) | "
        + " | ".join(f"{c} client{'s' if c > 1 else ''}" for c in clients)
        + f" | ÷ psycopg, same rounds ({' / '.join(str(c) for c in clients)}) | round trips per write (one client, counted on the wire) |",
        "|---|" + "---|" * (len(clients) + 2),
    ]
    for name, label in PG_WRITERS:
        try:
            w = pick(s6["writers"], writer=name)
        except Missing:
            out.append(f"| {label} | " + " | ".join(["not measured"] * (len(clients) + 2)) + " |")
            continue
        rates = " | ".join(f"{count(x)}/s" for x in w["median_writes_per_s"])
        if name == "psycopg":
            ratio = "1"
        else:
            ratio = bold(
                " / ".join("-" if x is None else f"{x:.2f}" for x in w["over_baseline"]),
                name == "python",
            )
        rt = w["round_trips_per_write"]
        out.append(f"| {label} | {rates} | {ratio} | {'-' if rt is None else f'{rt:.0f}'} |")
    goals = [
        "| goal in this run | " + " | ".join(f"{c} client{'s' if c > 1 else ''}" for c in clients) + " |",
        "|---|" + "---|" * len(clients),
    ]
    s6_targets = [t for t in r.get("targets", []) if t["what"].startswith("S6 Postgres writes/s")]
    for mode, label in [
        ("Python write() ÷ psycopg", "Python `write()` ÷ psycopg"),
        ("Python write() ÷ C", "Python `write()` ÷ C"),
        # The goal for C before it was "Python within 10 % of C"; older results carry it.
        ("C ÷ Python", "C ÷ Python"),
        ("Rust ÷ Python", "Rust ÷ Python"),
    ]:
        if not any(t["mode"] == mode for t in s6_targets):
            continue  # not a goal of the run these results record
        cells, bound = [], None
        for c in clients:
            found = [t for t in s6_targets if t["what"] == f"S6 Postgres writes/s, {c} client(s)" and t["mode"] == mode]
            if not found:
                cells.append("not measured")
                continue
            t = found[0]
            bound = t["target"]
            met = {True: "met", False: "missed", None: "not measured"}[t["met"]]
            cells.append(f"{t['measured']}: {met}")
        goals.append(f"| {label} {bound or ''} | " + " | ".join(cells) + " |")
    steps = ", ".join(
        f"{x['step'].split(' (')[0]} {us(x['timing']['p50_us'])}" for x in s6["write_steps"]
    )
    rec = r["scenarios"]["s7_pg_recovery"]
    with_limit = pick(rec, idle_limit_s=15)
    lines = [
        *out,
        "",
        *goals,
        "",
        f"Where one Rust `write()` spends its time (1 client, median per round trip): {steps}.",
        "",
        *executemany_lines(r),
        "",
        "Recovery: with the 15 s idle limit "
        + ("the server ended the idle holder" if with_limit["holder_ended"] else "the idle holder was not ended")
        + " and the next writer "
        + ("committed" if with_limit["committed"] else "failed")
        + f" after {with_limit['seconds']:.2f} s ({target(r, 'S7 recovery from an idle holder', 'pg write()')})",
    ]
    try:
        none = pick(rec, idle_limit_s=0)
        lines[-1] += (
            f"; without it the holder was never ended"
            if not none["holder_ended"]
            else "; without it the holder was ended anyway"
        ) + (
            f", and the next writer gave up after {none['seconds']:.1f} s."
            if not none["committed"]
            else f", and the next writer committed after {none['seconds']:.1f} s."
        )
    except Missing:
        lines[-1] += "."
    return "\n".join(lines)


def executemany_lines(r):
    """Scenario 10: Python's executemany in a transaction against psycopg 3's, or a line
    saying the results predate it."""
    many = r["scenarios"].get("s10_pg_executemany")
    if many is None:
        return [
            "These results predate the `executemany` scenario (scenario 10 of `make bench`): "
            "the next full run records it here."
        ]
    out = [
        f"| `executemany()` of {count(many['rows'])} rows in a transaction, then `commit()` "
        f"({many['rounds']} alternated rounds, median) | time | rows/s | ÷ psycopg speed, median of the rounds |",
        "|---|---|---|---|",
    ]
    for d in many["drivers"]:
        ratio = "1" if d["driver"] == "psycopg" else bold(f"{many['median_speed_over_psycopg']:.2f}")
        out.append(
            f"| {d['label']} | {secs(d['median_s'])} | {count(many['rows'] / d['median_s'])}/s | {ratio} |"
        )
    goal = target(r, "S10 Postgres executemany, 10,000 rows in a transaction", "writerlock ÷ psycopg speed")
    return [*out, "", f"Goal, `executemany()` at least psycopg 3's speed: {goal}."]


HOST_ORDER = ["rust", "c", "python", "php-sqlite3", "php-pdo"]


def hosts_block(r):
    """The host table: one writer by hand against the queue in every host, and the
    16-writer figures from Rust and from Python."""
    s = r["scenarios"]
    hosts = s.get("s9_hosts")
    if hosts is None:
        return (
            "These results predate the host scenario (scenario 9 of `make bench`): "
            "the next full run records it here."
        )
    goal = hosts["goal"]
    out = [
        f"One process, one connection, a one-row `INSERT` per transaction; "
        f"{count(hosts['transactions_per_round'])} transactions per variant in each of "
        f"{hosts['rounds']} alternated rounds, the queue's rate divided by the hand-written "
        f"rate of the same round (median); by CPU time: the same with each variant's rate per "
        f"second of the process's own CPU time, which other work on the machine disturbs less.",
        "",
        "| host | written as | tx/s (median) | ÷ by hand, median | goal ≥ " + f"{goal:.2f}" + " | by CPU time ÷ by hand |",
        "|---|---|---|---|---|---|",
    ]
    by_name = {h["host"]: h for h in hosts["hosts"]}
    for name in HOST_ORDER + [n for n in by_name if n not in HOST_ORDER]:
        h = by_name.get(name)
        if h is None:
            continue
        if "not_measured" in h:
            out.append(f"| {h['label']} | | not measured | | | |")
            continue
        hand = sorted(h["hand_commits_per_s"])
        out.append(
            f"| {h['label']} | by hand: `{h['hand_label']}` | {count(hand[len(hand) // 2])} | 1 | | 1 |"
        )
        for v in h["variants"]:
            q = sorted(v["commits_per_s"])
            m = v["median_ratio"]
            cpu = f"{v['cpu_median_ratio']:.2f}" if "cpu_median_ratio" in v else "—"
            out.append(
                f"| | queue: `{v['label']}` | {count(q[len(q) // 2])} | {bold(f'{m:.2f}')} | "
                f"{'met' if m >= goal else 'missed'} | {cpu} |"
            )
    alt = s.get("s3_alternated", {})
    py_rows = [row for row in alt.get("rows", []) if row.get("python")]
    rust_rows = [row for row in alt.get("rows", []) if row.get("mode") == "queue-handoff" and not row.get("python")]
    if py_rows and rust_rows and "longest_wait_ms" in rust_rows[0]:
        top = alt["writers"]
        out += [
            "",
            f"{top} writers through the queue, alternated with one process writing by hand in the "
            f"same language ({len(rust_rows[0]['ratios'])} rounds of {alt['duration_s']:.0f} s):",
            "",
            "| writers | ÷ serial, median | per round | longest wait | worst per-writer spread | goals |",
            "|---|---|---|---|---|---|",
        ]
        for label, row in (("Rust", rust_rows[0]), ("Python", py_rows[0])):
            mode = "python queue-handoff" if row.get("python") else "queue-handoff"
            goals = targets(
                r,
                [
                    f"S3 {top} writers alternated: ÷ serial runs just before and after (median)",
                    f"S3 {top} writers alternated: longest wait",
                    f"S3 {top} writers alternated: worst commit count from mean",
                ],
                mode,
            )
            out.append(
                f"| {label} | {bold(fraction(row['median']))} | "
                + " · ".join(fraction(x) for x in row["ratios"])
                + f" | {ms(row['longest_wait_ms'])} | {pct(row['worst_spread'])} | {goals} |"
            )
    return "\n".join(out)


BLOCKS = {
    "run": lambda r, f: run_line(r, f),
    "hosts": lambda r, f: hosts_block(r),
    "sqlite": lambda r, f: sqlite_block(r),
    "sqlite-facts": lambda r, f: sqlite_facts(r),
    "postgres": lambda r, f: pg_block(r),
}


def begin_marker(name, file):
    rel = os.path.relpath(file, ROOT)
    return f"<!-- bench-readme:begin {name}: made by make bench-readme from {rel}; edit bench/readme.py, not this block -->\n"


def render(readme, results, file):
    """The page with every generated block remade from `results`."""
    out, pos = [], 0
    for m in BEGIN.finditer(readme):
        name = m.group("name")
        end = f"<!-- bench-readme:end {name} -->"
        stop = readme.find(end, m.end())
        if stop < 0:
            raise Missing(f"{PAGE}: no {end} after its begin marker")
        if name not in BLOCKS:
            raise Missing(f"{PAGE}: unknown generated block {name!r}")
        out.append(readme[pos : m.start()])
        out.append(begin_marker(name, file))
        out.append(BLOCKS[name](results, file).rstrip("\n") + "\n")
        pos = stop
    if not out:
        raise Missing(f"{PAGE} has no bench-readme blocks")
    out.append(readme[pos:])
    return "".join(out)


# Settings of the code the prose may name (not measurements): the driver's
# 30 ms yield and the cap on commits/s it implies, the hand-off slice, the
# ledger session's idle limit, and the bench's own time bounds.
SETTINGS = {"30 ms", "33 commits/s", "2 ms", "15 s", "10 minutes"}
FIGURE = re.compile(r"\d[\d,.]*\s?(?:µs|ms|s|%|/s|commits/s|minutes)(?![\w/])|\b\d+\.\d{2,}\b")


def loose_figures(readme):
    """Measured-looking figures on the performance page outside the generated
    blocks (which only the results file may supply)."""
    section = re.sub(
        r"<!-- bench-readme:begin (?P<n>[a-z-]+):.*?<!-- bench-readme:end (?P=n) -->", "", readme, flags=re.S
    )
    section = re.sub(r"`[^`]*`", "", section)
    return [m.group(0) for m in FIGURE.finditer(section) if m.group(0) not in SETTINGS]


def load(file):
    with open(file, encoding="utf-8") as f:
        return json.load(f)


def newest_results():
    best = None
    for name in sorted(os.listdir(RESULTS_DIR)) if os.path.isdir(RESULTS_DIR) else []:
        if not name.endswith(".json"):
            continue
        path = os.path.join(RESULTS_DIR, name)
        meta = load(path).get("meta", {})
        if meta.get("complete") and (best is None or meta.get("date", "") > best[0]):
            best = (meta.get("date", ""), path)
    if best is None:
        raise Missing("no complete results under bench/results/: run make bench (a full run) first")
    return best[1]


def git(*args):
    return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True)


def notices(results, file):
    """Plain notices about how the results relate to the code checked out."""
    meta = results["meta"]
    rel = os.path.relpath(file, ROOT)
    said = []
    if meta.get("run") != "full":
        said.append(f"{rel} records a {meta.get('run')} run, not a full one.")
    changed = [p for p, c in (meta.get("uncommitted_changes") or {}).items() if c]
    if changed:
        said.append(f"{rel} was measured with uncommitted changes in {', '.join(changed)}.")
    commit = meta.get("commit")
    if git("rev-parse", "--git-dir").returncode != 0:
        said.append("not a git checkout: cannot tell whether src/ or bench/ changed since the run.")
    elif not commit:
        said.append(f"{rel} records no commit: it cannot be tied to the code.")
    elif git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        said.append(
            f"{rel} measured commit {commit[:12]}, which this clone does not have: "
            "cannot tell whether src/ or bench/ changed since."
        )
    else:
        diff = git("diff", "--quiet", commit, "HEAD", "--", *MEASURED, *NOT_MEASURED)
        dirty = git("status", "--porcelain", "--", *MEASURED, *NOT_MEASURED)
        if diff.returncode == 1:
            files = git("diff", "--name-only", commit, "HEAD", "--", *MEASURED, *NOT_MEASURED).stdout.split()
            said.append(
                f"the measured code changed since the run in {rel} (commit {commit[:12]}): "
                f"{len(files)} file(s) under src/ or bench/ differ ({', '.join(files[:5])}"
                f"{', ...' if len(files) > 5 else ''}). A full `make bench && make bench-readme` "
                "of the final code, committed, brings the figures up to date."
            )
        elif diff.returncode != 0:
            said.append(f"cannot compare commit {commit[:12]} with HEAD: {diff.stderr.strip()}")
        if dirty.returncode == 0 and dirty.stdout.strip():
            said.append("src/ or bench/ has uncommitted changes, which the figures do not measure.")
    return said


def main(argv):
    if len(argv) < 2 or argv[1] not in ("write", "check"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    with open(PAGE_PATH, encoding="utf-8") as f:
        readme = f.read()
    try:
        if argv[1] == "write":
            file = argv[2] if len(argv) > 2 else os.environ.get("BENCH_RESULTS") or newest_results()
            file = os.path.abspath(file)
            results = load(file)
            if not results.get("meta", {}).get("complete"):
                print(f"bench-readme: {file} is not a complete run; not using it", file=sys.stderr)
                return 1
            new = render(readme, results, file)
            if new != readme:
                with open(PAGE_PATH, "w", encoding="utf-8") as f:
                    f.write(new)
                print(f"bench-readme: {PAGE} made from {os.path.relpath(file, ROOT)}")
            else:
                print(f"bench-readme: {PAGE} already matches {os.path.relpath(file, ROOT)}")
            for n in notices(results, file):
                print(f"bench-readme: notice: {n}")
            return 0
        first = BEGIN.search(readme)
        if not first:
            print(f"check-bench-readme: {PAGE} has no bench-readme blocks", file=sys.stderr)
            return 1
        file = os.path.join(ROOT, first.group("file"))
        if not os.path.exists(file):
            print(
                f"check-bench-readme: {PAGE}'s figures come from {first.group('file')}, which does not exist",
                file=sys.stderr,
            )
            return 1
        others = {m.group("file") for m in BEGIN.finditer(readme)} - {first.group("file")}
        if others:
            print(
                f"check-bench-readme: {PAGE}'s blocks come from different results files: "
                f"{first.group('file')}, {', '.join(sorted(others))}",
                file=sys.stderr,
            )
            return 1
        results = load(file)
        expected = render(readme, results, file)
    except (Missing, KeyError, TypeError, ValueError, OSError) as e:
        what = e.args[0] if isinstance(e, Missing) else f"{type(e).__name__}: {e}"
        print(f"{'bench-readme' if argv[1] == 'write' else 'check-bench-readme'}: {what}", file=sys.stderr)
        return 1
    rel = os.path.relpath(file, ROOT)
    loose = loose_figures(readme)
    if loose:
        print(
            f"check-bench-readme: figures in {PAGE} that do not come from "
            f"{rel}: {', '.join(loose)}; put them in bench/readme.py's blocks or drop them",
            file=sys.stderr,
        )
        return 1
    if expected != readme:
        diff = difflib.unified_diff(
            readme.splitlines(True), expected.splitlines(True), PAGE, f"{PAGE} from {rel}"
        )
        sys.stderr.writelines(list(diff)[:80])
        print(
            f"check-bench-readme: {PAGE}'s figures differ from {rel}; "
            "make bench-readme rewrites them (never edit the generated blocks by hand)",
            file=sys.stderr,
        )
        return 1
    for n in notices(results, file):
        print(f"check-bench-readme: notice: {n}")
    print(f"check-bench-readme: {PAGE} matches {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
