#!/usr/bin/python3
"""bench/pp_actions.py on hand-made traces of a two-stage GPipe step (2 microbatches).

  bench_pp_actions_test.py PROJECT_SOURCE_DIR

Rank 0 runs stage 0 and rank 1 stage 1; F takes 1 ms and B 2 ms, communication is free. Rank 1
waits 1 ms for the first forward, rank 0 3 ms for the first gradient: the schedule's makespan is
9 ms for 12 ms of work on 2 ranks, a bubble of 1/3. In a second trace stage 1's actions take
twice as long: 15 ms for 18 ms of work.
"""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(sys.argv[1], "bench"))
import pp_actions  # noqa: E402

MS = 1000


def span(name, cat, start_ms, dur_ms):
    return {"ph": "X", "pid": 0, "tid": 1, "name": name, "cat": cat,
            "ts": int(start_ms * MS), "dur": int(dur_ms * MS)}


def write_step(folder, slow):
    """Rank 0: 0F0 0F1 0B0 0B1; rank 1: 1F0 1F1 1B0 1B1, stage 1 `slow` times as long."""
    os.makedirs(folder)
    f1, b1 = 1 * slow, 2 * slow
    rank1 = [("1F0", 1, f1), ("1F1", 1 + f1, f1), ("1B0", 1 + 2 * f1, b1),
             ("1B1", 1 + 2 * f1 + b1, b1)]
    rank0 = [("0F0", 0, 1), ("0F1", 1, 1), ("0B0", rank1[2][1] + b1, 2),
             ("0B1", rank1[3][1] + b1, 2)]
    for rank, actions in ((0, rank0), (1, rank1)):
        events = [span("data_loading", "data", -1, 1)]
        for name, start, dur in actions:
            stage, kind, mb = name[0], name[1], name[2]
            long = {"F": "forward", "B": "backward"}[kind]
            events.append(span(f"stage{stage}.{long} mb{mb}", "module", start, dur))
            events.append(span("Gemm", "kernel", start, dur / 2))
        with open(os.path.join(folder, f"rank{rank}_trace.json"), "w") as f:
            json.dump({"traceEvents": events}, f)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        even, slow = os.path.join(tmp, "even"), os.path.join(tmp, "slow")
        write_step(even, 1)
        write_step(slow, 2)
        per_action, idle, schedule, orders = pp_actions.analyze([even])
        assert per_action[(1, "B")] == [(2 * MS, MS, 0)] * 2, per_action
        assert orders[0] == [(0, "F", 0), (0, "F", 1), (0, "B", 0), (0, "B", 1)], orders
        assert idle[1]["1F0"] == MS and sum(idle[1].values()) == MS, idle[1]
        assert idle[0]["0B0"] == 3 * MS and sum(idle[0].values()) == 3 * MS, idle[0]
        assert schedule[0] == 9 * MS and schedule[1] == 7 * MS, schedule
        cost = {key: rows[0][0] for key, rows in per_action.items()}
        assert abs(pp_actions.simulate(orders, cost) - 1 / 3) < 1e-9
        # Stage 1 twice as slow: 0F0, 1F0, 1F1, 1B0, 1B1, 0B1 one after another.
        per_action, idle, schedule, orders = pp_actions.analyze([slow])
        cost = {key: rows[0][0] for key, rows in per_action.items()}
        assert abs(pp_actions.simulate(orders, cost) - (1 - 18 / 30)) < 1e-9
        # A rank waiting for an action nobody runs: a deadlock, no bubble.
        assert pp_actions.simulate({0: [(0, "B", 0)], 1: [(1, "F", 0)]}, cost) is None
    print("pp_actions: per-action times, idle attribution and the replayed bubble as built")


if __name__ == "__main__":
    main()
