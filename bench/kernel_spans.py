#!/usr/bin/python3
"""Time per kernel in one profiled step: sums a titan trace's `kernel` spans by name.

Usage: /usr/bin/python3 bench/kernel_spans.py TRACE.json [TRACE.json ...] [--top 12]

TRACE is what titan-run writes with profiling.enable_profiling = true
(<dump_folder>/profile_trace/iteration_<step>/rank<R>_trace.json). Prints a Markdown table: each
kernel's total milliseconds, its count and its share of the kernels' time, largest first; with
several traces, one column of milliseconds per trace, sorted by the first.
"""
import argparse
import collections
import json


def kernel_times(path):
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    totals, counts = collections.Counter(), collections.Counter()
    for event in events:
        if event.get("ph") == "X" and event.get("cat") == "kernel":
            totals[event["name"]] += event["dur"] / 1000.0
            counts[event["name"]] += 1
    return totals, counts


def step_ms(path):
    """The milliseconds of the trace's step span (0 when it has none)."""
    with open(path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    return sum(e["dur"] / 1000.0 for e in events if e.get("ph") == "X" and e.get("cat") == "step")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    runs = [kernel_times(path) for path in args.traces]
    first, counts = runs[0]
    total = sum(first.values())
    print("| kernel | count | " + " | ".join(f"ms ({i + 1})" for i in range(len(runs)))
          + " | share (1) |")
    print("|---|---:|" + "---:|" * len(runs) + "---:|")
    for name, ms in first.most_common(args.top):
        print(f"| {name} | {counts[name]} | "
              + " | ".join(f"{totals.get(name, 0.0):.1f}" for totals, _ in runs)
              + f" | {100 * ms / total:.1f}% |")
    print("| all kernels | | " + " | ".join(f"{sum(t.values()):.1f}" for t, _ in runs) + " | |")


if __name__ == "__main__":
    main()
