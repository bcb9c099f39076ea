#!/usr/bin/env python3
"""Tabulates alternating before/after runs of kfop-bench (one results dir per run, named
<round>-<before|after>) as a markdown table of per-side means and after/before ratios; rows of a
phase the runs skipped are left out.

Usage: passes_ab.py RUNS_DIR
"""
import json
import pathlib
import statistics
import sys

ROWS = [
    ("jobs/s, creation -> all pods exist", lambda d: d["operator"]["throughput_all_pods"], 1),
    ("jobs/s, creation -> Succeeded", lambda d: d["operator"]["throughput_succeeded"], 1),
    ("creation -> all pods exist, p50 (s)", lambda d: d["operator"]["latency_all_pods"]["p50"], 2),
    ("creation -> all pods exist, p99 (s)", lambda d: d["operator"]["latency_all_pods"]["p99"], 2),
    ("creation -> Succeeded, p50 (s)", lambda d: d["operator"]["latency_succeeded"]["p50"], 2),
    ("creation -> Succeeded, p99 (s)", lambda d: d["operator"]["latency_succeeded"]["p99"], 2),
    ("ceiling jobs/s (plain client, JSON)", lambda d: d["ceiling"]["throughput_all_pods"], 1),
    ("operator / ceiling", lambda d: d["operator"]["throughput_all_pods"] / d["ceiling"]["throughput_all_pods"], 2),
    ("reconciles per job", lambda d: d["operator"]["requests"]["reconciles_per_job"], 2),
    ("status writes per job", lambda d: next(v for k, v in d["operator"]["requests"]["per_job_by_kind"].items() if k.startswith("patch") and k.endswith("/status 200")), 2),
    ("API requests per job", lambda d: d["operator"]["requests"]["per_job"], 2),
    ("API server CPU per job (s)", lambda d: d["operator"]["server_cpu_seconds"] / d["operator"]["jobs"], 3),
    ("operator CPU (s)", lambda d: d["operator"]["process"]["cpu_seconds"], 1),
    ("operator peak RSS (MB)", lambda d: d["operator"]["process"]["peak_rss_mb"], 1),
]


def main():
    runs = pathlib.Path(sys.argv[1])
    sides = {"before": [], "after": []}
    for run in sorted(runs.iterdir()):
        side = run.name.split("-", 1)[-1]
        if side in sides and (run / "summary.json").is_file():
            sides[side].append(json.loads((run / "summary.json").read_text()))
    n = min(len(v) for v in sides.values())
    print(f"| mean of {n} runs each (each run's values: before; after) | before | after | after / before |")
    print("|---|---|---|---|")
    for label, get, digits in ROWS:
        try:
            before = [get(d) for d in sides["before"]]
            after = [get(d) for d in sides["after"]]
        except (KeyError, TypeError):
            continue  # a phase these runs skipped (--no-ceiling)
        b, a = statistics.mean(before), statistics.mean(after)
        each = "; ".join(", ".join(f"{v:.{digits}f}" for v in vs) for vs in (before, after))
        print(f"| {label} ({each}) | {b:.{digits}f} | {a:.{digits}f} | {a / b:.2f} |")


if __name__ == "__main__":
    main()
