#!/usr/bin/python3
"""Checks what a run with the control plane logged (tests/CMakeLists.txt, control_plane.*).

    control_plane_events.py --run DIR --topology FILE --hops H --titan-lbdc BIN
                            --straggler R --lost C

DIR holds the run's control_plane.jsonl and output.log (run_layout.py writes both). Checks:
every rank's potential controllers are the controller ranks within H hops of it in FILE; each
step every rank reports to exactly one controller, within its potential set; the first
assignment's max load equals titan-lbdc's for the same policy on the same instance (FILE, the
same controllers and hops, the measured loads as a trace); rank R is named a straggler and a
late heartbeat; controller C is lost and each of its workers migrates to a live controller of
its potential set, after which C watches no one.
"""
import argparse
import json
import os
import subprocess
import sys
import tomllib


def hops_from(topology, start):
    neighbours = {name: [] for name in topology["switches"]}
    for a, b in topology["links"]:
        neighbours[a].append(b)
        neighbours[b].append(a)
    distance, frontier = {start: 0}, [start]
    while frontier:
        following = []
        for u in frontier:
            for v in neighbours[u]:
                if v not in distance:
                    distance[v] = distance[u] + 1
                    following.append(v)
        frontier = following
    return distance


def check(condition, message):
    if not condition:
        sys.exit(f"FAILED: {message}")
    print(f"ok: {message}")


def main():
    parser = argparse.ArgumentParser()
    for flag in ("--run", "--topology", "--titan-lbdc"):
        parser.add_argument(flag, required=True)
    for flag in ("--hops", "--straggler", "--lost"):
        parser.add_argument(flag, type=int, required=True)
    args = parser.parse_args()
    with open(os.path.join(args.run, "control_plane.jsonl")) as f:
        events = [json.loads(line) for line in f]
    with open(os.path.join(args.run, "output.log")) as f:
        log = f.read()
    with open(args.topology, "rb") as f:
        topology = tomllib.load(f)
    ranks = sorted(int(s[4:]) for s in topology["switches"] if s.startswith("rank"))

    assignments = [e for e in events if e["event"] == "assignment"]
    check(len(assignments) >= 1 and assignments[0]["why"] == "start",
          "the first assignment is logged, at the start")
    first = assignments[0]
    controllers = first["controllers"]
    expected, expected_nearest = [], []
    for r in ranks:
        distance = hops_from(topology, f"rank{r}")
        expected.append(sorted(c for c in controllers if distance[f"rank{c}"] <= args.hops))
        # Before the first loads are measured a rank reports to its nearest, lowest first.
        expected_nearest.append(sorted(expected[-1], key=lambda c: (distance[f"rank{c}"], c)))
    check([sorted(p) for p in first["potential"]] == expected,
          f"potential controllers are those within {args.hops} hops: {expected}")
    for a in assignments:
        check(all(a["controller_of"][r] in expected[r] for r in ranks),
              f"step {a['step']} ({a['why']}): every rank's controller is in its potential set")

    # Each step's controller records: every rank reported to exactly one controller, the one the
    # assignment in force names; only the lost controller's workers go unwatched, from the step
    # it stopped until its loss is declared.
    lost = [e for e in events if e["event"] == "controller_lost"]
    check([e["controller"] for e in lost] == [args.lost], f"controller {args.lost} is lost")
    when = lost[0]["step"]
    steps = sorted({e["step"] for e in events if e["event"] == "controller"})
    check(steps == list(range(1, steps[-1] + 1)), f"controller records at steps {steps}")
    for step in steps:
        earlier = [a for a in assignments if a["step"] < step]
        in_force = earlier[-1]["controller_of"] if earlier else [p[0] for p in expected_nearest]
        groups = [e for e in events if e["event"] == "controller" and e["step"] == step]
        watched = sorted(w for g in groups for w in g["workers"])
        silent = [r for r in ranks if in_force[r] not in [g["controller"] for g in groups]]
        check(sorted(watched + silent) == ranks and
              all(g["reports"] == len(g["workers"]) for g in groups) and
              all(in_force[w] == g["controller"] for g in groups for w in g["workers"]) and
              all(in_force[r] == args.lost and step <= when for r in silent),
              f"step {step}: each rank reported to exactly one controller, its assigned one; "
              f"unwatched: {silent}")

    # The same instance through titan-lbdc: the rank switches carry the measured loads.
    trace = os.path.join(args.run, "first_loads.csv")
    with open(trace, "w") as f:
        loads = [first["loads"][int(s[4:])] if s.startswith("rank") else 0
                 for s in topology["switches"]]
        f.write(",".join(f"{w:.17g}" for w in loads) + "\n")
    report = os.path.join(args.run, "lbdc.json")
    subprocess.run([args.titan_lbdc, "--quiet", f"--topology={args.topology}",
                    "--placement=given",
                    "--controllers-at=" + ",".join(f"rank{c}" for c in controllers),
                    f"--hops={args.hops}", f"--loads=trace:{trace}",
                    f"--policies={first['policy']}", f"--json={report}"], check=True)
    with open(report) as f:
        (lbdc,) = json.load(f)
    check(lbdc["max_load"] == first["max_load"],
          f"max load {first['max_load']} equals titan-lbdc's {first['policy']}: "
          f"{lbdc['max_load']}")
    check(first["max_load"] == max(first["controller_loads"]) and
          first["lower_bound"] <= first["max_load"],
          "the max load is the heaviest controller's, at least the policy's lower bound")

    stragglers = [e for e in events if e["event"] == "straggler"]
    check(any(e["worker"] == args.straggler for e in stragglers) and
          f"worker rank {args.straggler} is a straggler" in log,
          f"rank {args.straggler} is named a straggler")
    late = [e for e in events if e["event"] == "heartbeat_missed"]
    check(any(e["worker"] == args.straggler for e in late) and
          f"worker rank {args.straggler} sent no heartbeat" in log,
          f"rank {args.straggler}'s late heartbeat is named")

    before = [a for a in assignments if a["step"] < when][-1]["controller_of"]
    orphans = [r for r in ranks if before[r] == args.lost]
    moves = {e["worker"]: e for e in events
             if e["event"] == "migration" and e["step"] == when and e["from"] == args.lost}
    check(orphans and sorted(moves) == orphans and
          all(f"controller rank {args.lost} lost" in m["why"] for m in moves.values()),
          f"controller {args.lost}'s workers {orphans} each migrate, the loss named as why")
    check(all(m["to"] != args.lost and m["to"] in expected[m["worker"]] for m in moves.values()),
          "each to a live controller of its potential set")
    after = [a for a in assignments if a["step"] >= when]
    check(after and all(args.lost not in a["controller_of"] and args.lost not in a["controllers"]
                        for a in after),
          f"from step {when} on controller {args.lost} watches no rank")
    check(f"migration of rank {orphans[0]} from controller rank {args.lost}" in log,
          "the migrations are in the log")


if __name__ == "__main__":
    main()
