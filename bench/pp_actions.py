#!/usr/bin/python3
"""Where a pipeline step's time goes, from the profiler's traces of one step on every pp rank.

  pp_actions.py TRACE_DIR [TRACE_DIR...]

TRACE_DIR is a profiled step's folder (<dump>/profile_trace/iteration_<step>) holding
rank<R>_trace.json. Several folders (steps) are averaged. Prints, per stage and action type
(F, B, I, W), the mean time of one action and of the GEMMs and copies inside it; then, per rank,
the schedule's idle time (from the end of the step's data loading to the rank's last action, the
time outside F, B, I and W) and the actions it waited before, largest first; last, the bubble these action orders would
have with these mean times if communication were free (what the stages' costs alone explain),
and with balanced stages (each action type's time averaged over the stages).
"""
import collections
import json
import os
import re
import sys

ACTION = re.compile(r"^stage(\d+)\.(forward|backward|backward_input|backward_weight) mb(\d+)$")
SHORT = {"forward": "F", "backward": "B", "backward_input": "I", "backward_weight": "W"}


def load(path):
    with open(path) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return [e for e in events if e.get("ph") == "X"]


def inside(span, events, category):
    """The time of `category` spans nested directly or deeper in `span` on its track."""
    start, end = span["ts"], span["ts"] + span["dur"]
    by_name = collections.Counter()
    for e in events:
        if e.get("cat") == category and e["tid"] == span["tid"] and start <= e["ts"] < end:
            by_name[e["name"]] += e["dur"]
    return by_name


def simulate(orders, cost):
    """The bubble of the ranks' action orders with these action times and free communication:
    1 - work / (ranks x makespan), as the theoretical bubble counts it; None on a deadlock."""
    last_stage = max(stage for order in orders.values() for stage, _, _ in order)
    done, clock, next_action = {}, {r: 0.0 for r in orders}, {r: 0 for r in orders}
    progress = True
    while progress:
        progress = False
        for rank, order in orders.items():
            while next_action[rank] < len(order):
                stage, kind, mb = order[next_action[rank]]
                if kind == "F":
                    deps = [(stage - 1, "F", mb)] if stage > 0 else []
                elif kind == "W":
                    deps = [(stage, "I", mb)]
                else:
                    deps = [(stage, "F", mb)]
                    if stage < last_stage:
                        later = (stage + 1, "B", mb)
                        deps.append(later if later in done else (stage + 1, "I", mb))
                if any(d not in done for d in deps):
                    break
                start = max([clock[rank]] + [done[d] for d in deps])
                clock[rank] = done[(stage, kind, mb)] = start + cost[(stage, kind)]
                next_action[rank] += 1
                progress = True
    if any(next_action[r] < len(o) for r, o in orders.items()):
        return None
    work = sum(cost[(s, k)] for o in orders.values() for s, k, _ in o)
    return 1 - work / (len(orders) * max(clock.values()))


def analyze(folders):
    """Per (stage, type) the actions' (us, GEMM us, copy us); per rank the idle us before each
    action and the schedule's us (summed over the folders); per rank its action order."""
    per_action = collections.defaultdict(list)  # (stage, type) -> [(us, gemm us, copy us)]
    idle = collections.defaultdict(collections.Counter)  # rank -> action name -> us
    schedule = collections.defaultdict(float)  # rank -> us from the first action to the last
    orders = {}  # rank -> its (stage, type, microbatch) in the order it ran them
    for folder in folders:
        for name in sorted(os.listdir(folder)):
            m = re.match(r"rank(\d+)_trace\.json$", name)
            if not m:
                continue
            rank = int(m.group(1))
            events = load(os.path.join(folder, name))
            actions = []
            for e in events:
                a = ACTION.match(e["name"])
                if a and e.get("cat") == "module":
                    actions.append((e, int(a.group(1)), SHORT[a.group(2)], int(a.group(3))))
            actions.sort(key=lambda x: x[0]["ts"])
            if not actions:
                continue
            orders.setdefault(rank, [(s, k, mb) for _, s, k, mb in actions])
            kernels = [e for e in events if e.get("cat") == "kernel"]
            for e, stage, kind, _ in actions:
                k = inside(e, kernels, "kernel")
                copies = sum(v for n, v in k.items() if n.startswith("Copy"))
                per_action[(stage, kind)].append((e["dur"], k.get("Gemm", 0), copies))
            first, last = actions[0][0], actions[-1][0]
            # The schedule starts after the step's data loading; a rank may first wait to receive.
            loaded = max((e["ts"] + e["dur"] for e in events
                          if e.get("cat") == "data" and e["ts"] + e["dur"] <= first["ts"]),
                         default=first["ts"])
            lead = first["ts"] - loaded
            idle[rank][f"{actions[0][1]}{actions[0][2]}{actions[0][3]}"] += lead
            schedule[rank] += last["ts"] + last["dur"] - loaded
            for (prev, *_), (cur, stage, kind, mb) in zip(actions, actions[1:]):
                gap = cur["ts"] - (prev["ts"] + prev["dur"])
                idle[rank][f"{stage}{kind}{mb}"] += max(gap, 0)
    return per_action, idle, schedule, orders


def main(folders):
    per_action, idle, schedule, orders = analyze(folders)
    steps = len(folders)
    print("| stage | action | count/step | mean (ms) | GEMMs (ms) | copies (ms) | other (ms) |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for (stage, kind), rows in sorted(per_action.items(), key=lambda x: (x[0][0], "FBIW".index(
            x[0][1]))):
        n = len(rows)
        t, g, c = (sum(r[i] for r in rows) / n / 1000 for i in range(3))
        print(f"| {stage} | {kind} | {n // steps} | {t:.2f} | {g:.2f} | {c:.2f} | "
              f"{t - g - c:.2f} |")
    print()
    print("| rank | schedule (ms) | idle (ms) | idle share | largest waits: before action (ms) |")
    print("|---:|---:|---:|---:|---|")
    for rank in sorted(idle):
        total = sum(idle[rank].values()) / steps / 1000
        span = schedule[rank] / steps / 1000
        top = ", ".join(f"{a} {us / steps / 1000:.1f}" for a, us in idle[rank].most_common(6)
                        if us > 0)
        print(f"| {rank} | {span:.1f} | {total:.1f} | {100 * total / span:.1f}% | {top} |")
    cost = {key: sum(r[0] for r in rows) / len(rows) for key, rows in per_action.items()}
    bubble = simulate(orders, cost)
    if bubble is not None:
        print(f"\nThese action orders with these mean times and free communication: "
              f"{100 * bubble:.1f}% bubble")
    # The same with every stage's F (B, I, W) taking the stages' mean: balanced stages.
    kinds = {k for _, k in cost}
    mean = {k: sum(v for (_, kk), v in cost.items() if kk == k) /
            sum(1 for _, kk in cost if kk == k) for k in kinds}
    balanced = simulate(orders, {key: mean[key[1]] for key in cost})
    if balanced is not None:
        print(f"... with balanced stages (each type's time averaged over the stages): "
              f"{100 * balanced:.1f}% bubble")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
