#!/usr/bin/env python3
"""Runs the workspace's already built tests in parallel lanes, one `cargo test` per target.

Cargo runs test binaries one after another, and most of them spend their time waiting on a
local control plane: in a clean-checkout CI the test phase took 44 minutes with half of the two
cores idle. Each lane is a `cargo test --workspace` selecting one target, so feature resolution
is the same as the build's (nothing recompiles); the slowest targets go first so the lanes end
together. A target's output is printed whole when it ends, and every failure is listed again at
the end. Exit status: 0 when every target passed.

Usage: test_lanes.py [LANES]   (default: $KFOP_TEST_LANES or 2)
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

# Slowest first, from the clean-checkout CI of 2026-12-05 (seconds): differential 484, ui 427,
# scaffold 345, sdk 226, soak 135, webhook 126, admission 117, chaos 117, conversion 105; and
# from local runs on a loaded machine of 2026-12-06: takeover 370, multikueue 120.
SLOW_FIRST = ["differential", "ui", "takeover", "scaffold", "sdk", "soak", "webhook", "multikueue",
              "admission", "chaos", "conversion", "stranded", "smoke", "install", "status_rule",
              "kubeflow_peer", "katib", "kueue_pod_groups", "kueue"]
# cargo's failure summary: each failed test's output header and, under `failures:`, its name.
FAILURE_LINE = re.compile(r"^(?:---- .* stdout ----|error: test failed.*|    [a-z_:0-9]+)$", re.M)
# A panic and the first lines of its message: the reason, which CI's tail would otherwise cut.
PANIC = re.compile(r"^thread '.*' .*panicked at .*$(?:\n(?!stack backtrace:|note: ).*){0,6}", re.M)


def test_targets():
    """Every distinct integration-test target name in the workspace."""
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--no-deps", "--format-version", "1"],
        check=True, capture_output=True, text=True).stdout)
    names = {t["name"] for p in meta["packages"] for t in p["targets"] if "test" in t["kind"]}
    return sorted(names, key=lambda n: (SLOW_FIRST.index(n) if n in SLOW_FIRST else len(SLOW_FIRST), n))


def run(selector):
    started = time.monotonic()
    with tempfile.TemporaryFile(mode="w+") as out:
        code = subprocess.run(["cargo", "test", "--workspace", "--no-fail-fast", *selector],
                              stdout=out, stderr=subprocess.STDOUT).returncode
        out.seek(0)
        text = out.read()
    return selector, code, time.monotonic() - started, text


def main():
    lanes = int(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("KFOP_TEST_LANES", "2"))
    selectors = [["--test", n] for n in test_targets()] + [["--lib"], ["--bins"], ["--doc"]]
    failed, times = [], []
    with ThreadPoolExecutor(max_workers=lanes) as pool:
        for done in as_completed([pool.submit(run, s) for s in selectors]):
            selector, code, secs, text = done.result()
            label = " ".join(selector)
            status = "ok" if code == 0 else f"FAILED (exit {code})"
            print(f"\n==> cargo test --workspace {label}: {status} in {secs:.0f} s\n{text}", flush=True)
            times.append((secs, label))
            if code != 0:
                reasons = [line[:400] for panic in PANIC.findall(text) for line in panic.splitlines()]
                failed.append((label, FAILURE_LINE.findall(text) + reasons))
    print("\n==> time per target (s)")
    for secs, label in sorted(times, reverse=True):
        print(f"{secs:7.0f}  {label}")
    for label, lines in failed:
        print(f"FAILED: cargo test --workspace {label}", file=sys.stderr)
        for line in lines:
            print(f"FAILED: {line}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
