"""The figures of benchmarks/load_fault.py: throughput, errors per phase, recovery times,
the server logs' view, and the verdict (lost, doubled, stuck)."""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

from load_fault_clients import Attempt, Reviewer


def _window(items: list[Attempt], start: float, end: float) -> list[Attempt]:
    """The requests answered (or failed) in [start, end): a request in flight when a fault
    struck counts in the fault's phase."""
    return [a for a in items if start <= a.done < end]


def recovery(attempts: list[Attempt], start: float, end: float) -> dict[str, Any]:
    """Requests that failed in [start, end); when the last one failed, and the first success
    sent after it (seconds from ``start``): the time until the service answered again."""
    failed = [a for a in _window(attempts, start, end) if a.failed]
    if not failed:
        return {"failed_requests": 0, "last_failure_s": None, "recovered_s": 0.0}
    last = max(a.done for a in failed)
    after = [a.done for a in attempts if not a.failed and a.sent >= last]
    return {
        "failed_requests": len(failed),
        "first_failure_s": round(min(a.done for a in failed) - start, 2),
        "last_failure_s": round(last - start, 2),
        "recovered_s": round(min(after) - start, 2) if after else None,
    }


def longest_gap(times: list[float], start: float, end: float) -> float:
    """The longest stretch in [start, end) without an acknowledged label (seconds): what the
    reviewers as a whole felt of a fault."""
    inside = sorted(t for t in times if start <= t < end)
    edges = [start, *inside, end]
    return round(max(b - a for a, b in pairwise(edges)), 2)


def health_gaps(health: list[tuple[float, int, str]], start: float, end: float) -> dict[str, Any]:
    """Per app process: how long after ``start`` /healthz was last not 200 in the window,
    and how many polls failed."""
    gaps = {}
    for index in (0, 1):
        polls = [(t, o) for t, i, o in health if i == index and start <= t < end]
        bad = [t for t, o in polls if o != "200"]
        gaps[f"process {index}"] = {
            "failed_polls": len(bad),
            "unhealthy_from_s": round(min(bad) - start, 2) if bad else None,
            "healthy_again_s": round(
                min((t for t, o in polls if o == "200" and t > max(bad)), default=end) - start, 2
            )
            if bad
            else 0.0,
        }
    return gaps


def server_log(path: Path) -> dict[str, Any]:
    """One app process's JSON log: answers by status, 'database unavailable' warnings,
    errors and tracebacks, lines that are not JSON."""
    statuses: Counter[str] = Counter()
    found = {"database_unavailable_warnings": 0, "error_lines": 0, "tracebacks": 0, "not_json": 0}
    for line in path.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            found["not_json"] += 1
            continue
        if record.get("logger") == "misstriage.access":
            statuses[str(record.get("status"))] += 1
        if str(record.get("message", "")).startswith("database unavailable"):
            found["database_unavailable_warnings"] += 1
        if record.get("level") in ("ERROR", "CRITICAL"):
            found["error_lines"] += 1
        if "exception" in record:
            found["tracebacks"] += 1
    return {"answers_by_status": dict(sorted(statuses.items())), **found}


def summarise(
    *,
    args: Any,
    reviewers: list[Reviewer],
    faults: dict[str, float],
    health: list[tuple[float, int, str]],
    leases: dict[str, Any],
    drain_report: dict[str, Any],
    labels: dict[str, Any],
    abandoned: dict[str, Any],
    server_logs: list[Path],
    setup_s: float,
) -> dict[str, Any]:
    """The report as one JSON-able dict."""
    attempts = [a for r in reviewers for a in r.attempts]
    acks = [a for r in reviewers for a in r.acknowledged]
    phases = [
        ("before the faults", 0.0, faults["kill"]),
        ("app process killed and restarted", faults["kill"], faults["pg_restart"]),
        ("PostgreSQL restarted", faults["pg_restart"], faults["end"]),
    ]
    phase_rows = []
    for name, start, end in phases:
        window = _window(attempts, start, end)
        labelled = sum(1 for a in acks if start <= a.at < end)
        phase_rows.append(
            {
                "phase": name,
                "from_s": round(start, 1),
                "to_s": round(end, 1),
                "labels": labelled,
                "labels_per_s": round(labelled / max(end - start, 1e-9), 1),
                "requests": len(window),
                "failed": dict(Counter(a.outcome for a in window if a.failed).most_common()),
                "refused": dict(
                    Counter(
                        f"{a.op} {a.outcome}" for a in window if a.outcome.startswith("4")
                    ).most_common()
                ),
            }
        )
    step = 10.0 if faults["end"] > 60 else 5.0
    timeline = []
    moment = 0.0
    while moment < faults["end"]:
        timeline.append(
            {
                "from_s": moment,
                "labels": sum(1 for a in acks if moment <= a.at < moment + step),
                "failed": sum(1 for a in _window(attempts, moment, moment + step) if a.failed),
            }
        )
        moment += step
    killed = [a for a in attempts if a.process == 1 and a.sent >= faults["killed"] and not a.failed]
    stuck = (
        len(drain_report["stuck_ids"])
        + leases["after_wait"]["live"]
        + leases["after_wait"]["without_expiry"]
    )
    run_s = faults["stop"]
    verdict = {
        "lost": labels["lost"],
        "doubled": labels["doubled"],
        "stuck": stuck,
        "contradictions": labels["contradictions"],
        "events_equal_labels": labels["events_equal_labels"],
        "reviewer_failures": [r.failure for r in reviewers if r.failure],
    }
    verdict["ok"] = (
        verdict["lost"] == verdict["doubled"] == verdict["stuck"] == 0
        and verdict["contradictions"] == 0
        and bool(verdict["events_equal_labels"])
        and not verdict["reviewer_failures"]
        and not drain_report["drain_refusals"]
    )
    return {
        "settings": {
            "seconds": args.seconds,
            "reviewers": args.reviewers,
            "misses": args.misses,
            "app_processes": 2,
            "think_s": list(args.think),
            "lease_seconds": args.lease_seconds,
            "kill_at_s": round(faults["kill"], 1),
            "pg_restart_at_s": round(faults["pg_restart"], 1),
            "setup_s": round(setup_s, 1),
        },
        "throughput": {
            "labels_acknowledged": len(acks),
            "labels_per_s": round(len(acks) / run_s, 1),
            "requests": len(attempts),
            "requests_per_s": round(len(attempts) / run_s, 1),
            "claims": sum(r.claims for r in reviewers),
            "run_s": round(run_s, 1),
            "drain_after_stop_s": round(faults["end"] - faults["stop"], 1),
        },
        "phases": phase_rows,
        "recovery": {
            "app_kill": {
                "restarted_process_healthy_s": round(
                    faults["restarted_healthy"] - faults["kill"], 2
                ),
                "first_success_on_restarted_process_s": round(
                    min(a.done for a in killed) - faults["kill"], 2
                )
                if killed
                else None,
                **recovery(attempts, faults["kill"], faults["pg_restart"]),
                "longest_gap_without_a_label_s": longest_gap(
                    [a.at for a in acks], faults["kill"], faults["pg_restart"]
                ),
                "healthz": health_gaps(health, faults["kill"], faults["pg_restart"]),
            },
            "postgresql_restart": {
                "pg_ctl_restart_s": round(faults["pg_up"] - faults["pg_restart"], 2),
                **recovery(attempts, faults["pg_restart"], faults["end"]),
                "longest_gap_without_a_label_s": longest_gap(
                    [a.at for a in acks], faults["pg_restart"], faults["stop"]
                ),
                "failed_requests_sent_after_postgresql_was_up": sum(
                    1 for a in attempts if a.sent >= faults["pg_up"] and a.failed
                ),
                "healthz": health_gaps(health, faults["pg_restart"], faults["end"]),
            },
        },
        "timeline": timeline,
        "leases": leases,
        "drain": {k: v for k, v in drain_report.items() if k != "stuck_ids"}
        | {"stuck_samples": drain_report["stuck_ids"][:20]},
        "labels": labels,
        "abandoned_leases": abandoned,
        "unresolved_by_outcome": dict(
            Counter(item["outcome"] for r in reviewers for item in r.unresolved)
        ),
        "server_logs": {path.name: server_log(path) for path in server_logs},
        "verdict": verdict,
    }


def write_report(report: dict[str, Any], out: Path) -> bool:
    """Print the readable report and the JSON; write report.json. True when it passed."""
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    s, t, v = report["settings"], report["throughput"], report["verdict"]
    print(
        f"\n{s['reviewers']} reviewers, {s['app_processes']} app processes, PostgreSQL, "
        f"{t['run_s']} s (app process killed at {s['kill_at_s']} s, PostgreSQL restarted at "
        f"{s['pg_restart_at_s']} s); think {s['think_s'][0]}-{s['think_s'][1]} s"
    )
    print(
        f"throughput: {t['labels_acknowledged']:,} labels acknowledged, {t['labels_per_s']} "
        f"labels/s; {t['requests']:,} requests, {t['requests_per_s']} requests/s"
    )
    print("\n| phase | s | labels | labels/s | requests | failed (repeated) | refused |")
    print("|---|---|---|---|---|---|---|")
    for p in report["phases"]:
        failed = ", ".join(f"{k}: {n}" for k, n in p["failed"].items()) or "0"
        refused = ", ".join(f"{k}: {n}" for k, n in p["refused"].items()) or "0"
        print(
            f"| {p['phase']} | {p['from_s']}-{p['to_s']} | {p['labels']:,} | "
            f"{p['labels_per_s']} | {p['requests']:,} | {failed} | {refused} |"
        )
    kill, pg = report["recovery"]["app_kill"], report["recovery"]["postgresql_restart"]
    print(
        f"\napp kill: the other process kept serving (longest stretch without a label "
        f"{kill['longest_gap_without_a_label_s']} s); the restarted process was healthy after "
        f"{kill['restarted_process_healthy_s']} s, its first success at "
        f"{kill['first_success_on_restarted_process_s']} s; {kill['failed_requests']} failed "
        f"requests (repeated on the other process), the last at {kill['last_failure_s']} s"
    )
    print(
        f"PostgreSQL restart: pg_ctl restart took {pg['pg_ctl_restart_s']} s; "
        f"{pg['failed_requests']} failed requests (repeated), the last at "
        f"{pg['last_failure_s']} s; answering again {pg['recovered_s']} s after the restart "
        f"began (longest stretch without a label {pg['longest_gap_without_a_label_s']} s); "
        f"{pg['failed_requests_sent_after_postgresql_was_up']} failed after PostgreSQL was up"
    )
    print(
        "timeline (labels/failed per bucket): "
        + " ".join(f"{b['from_s']:g}s:{b['labels']}/{b['failed']}" for b in report["timeline"])
    )
    labels, drain = report["labels"], report["drain"]
    print(
        f"\ndatabase: {labels['labelled_misses']:,} labelled misses, {labels['label_events']:,} "
        f"'label' events (equal: {labels['events_equal_labels']}); acknowledged "
        f"{labels['acknowledged']:,} (of which {labels['acknowledged_by_409_own_label']} through "
        f"a repeat that found its own label, {drain['labelled_by_drain']} by the checker's "
        f"drain); stored without acknowledgement: {labels['stored_without_ack']}"
    )
    print(
        f"leases after the run: {report['leases']['after_run']}; after waiting "
        f"{report['leases']['waited_s']} s: {report['leases']['after_wait']}; drain up to "
        f"position {drain['frontier_position']}: {drain['open_behind_frontier']} open misses "
        f"behind it, all handed out again unless counted stuck; misses left leased by "
        f"reviewers who walked away: {report['abandoned_leases']}"
    )
    for name, log in report["server_logs"].items():
        print(f"{name}: {log}")
    print(
        f"\nlost: {v['lost']}  doubled: {v['doubled']}  stuck: {v['stuck']}  "
        f"contradictions: {v['contradictions']}  reviewer failures: {len(v['reviewer_failures'])}"
        f"  -> {'PASS' if v['ok'] else 'FAIL'}"
    )
    print("\nJSON:\n" + json.dumps(report))
    print(f"\n(report, clients' log and server logs in {out})")
    return bool(v["ok"])
