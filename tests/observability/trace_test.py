#!/usr/bin/python3
"""The profiler's Chrome trace of a two-rank step, checked against the flight recorder.

  trace_test.py TITAN_RUN RECIPE OUT MPIEXEC LAYOUT

LAYOUT is fsdp (2 ranks sharding) or pp (2 pipeline stages, 1F1B over 4 microbatches).

Each rank's trace must be trace-event JSON whose spans nest on every thread's track, whose spans
cover at least 90% of the profiled step, and which names every collective the flight recorder
saw during that step (op, communicator, sequence, bytes, peers). The memory snapshot of the
step must list the model's arenas and the peak.
"""
import json
import os
import shutil
import subprocess
import sys

STEP = 2


def check_events(events):
    for e in events:
        assert e["ph"] in ("X", "M"), e
        assert isinstance(e["pid"], int) and isinstance(e["name"], str), e
        if e["ph"] == "X":
            assert isinstance(e["tid"], int) and isinstance(e["ts"], int), e
            assert isinstance(e["dur"], int) and e["dur"] >= 0, e
            assert isinstance(e.get("args", {}), dict), e


def check_nesting(spans):
    """On each track a span lies inside the one open before it, or after it."""
    by_thread = {}
    for s in spans:
        by_thread.setdefault(s["tid"], []).append(s)
    for tid, track in by_thread.items():
        stack = []
        for s in sorted(track, key=lambda s: (s["ts"], -s["dur"])):
            while stack and s["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
                stack.pop()
            if stack:
                top = stack[-1]
                assert s["ts"] + s["dur"] <= top["ts"] + top["dur"], \
                    f"thread {tid}: {s['name']} overlaps {top['name']} without nesting"
            stack.append(s)


def covered(step, spans):
    """The share of the step's time that the spans directly inside it on its track cover."""
    start, end = step["ts"], step["ts"] + step["dur"]
    inside = sorted((s["ts"], s["ts"] + s["dur"]) for s in spans
                    if s is not step and s["tid"] == step["tid"] and start <= s["ts"] < end)
    total, reach = 0, start
    for a, b in inside:
        a = max(a, reach)
        if b > a:
            total += b - a
            reach = b
    return total / max(step["dur"], 1)


LAYOUTS = {
    "fsdp": ([], ["model.forward", "model.backward", "layers.0.forward", "layers.0.backward"],
             {"(device)", "activations", "optimizer_state"}),
    "pp": (["--parallelism.pipeline_parallel_degree=2", "--parallelism.data_parallel_shard_degree=1",
            "--parallelism.pipeline_parallel_microbatch_size=1", "--training.local_batch_size=4"],
           ["stage{rank}.forward mb0", "stage{rank}.backward mb3"],
           {"parameters", "gradients", "activations", "optimizer_state"}),
}


def check_rank(out, rank, layout):
    trace_path = os.path.join(out, "profile_trace", f"iteration_{STEP}", f"rank{rank}_trace.json")
    with open(trace_path) as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    check_events(events)
    spans = [e for e in events if e["ph"] == "X"]
    assert all(e["pid"] == rank for e in events), f"rank {rank}: events of another process"
    check_nesting(spans)
    (step,) = [s for s in spans if s["name"] == f"step {STEP}"]
    names = {s["name"] for s in spans}
    _, modules, arenas_expected = LAYOUTS[layout]
    for expected in [m.format(rank=rank) for m in modules] + [
            "data_loading", "optimizer.step", "Gemm", "AttentionForward"]:
        assert expected in names, f"rank {rank}: no span {expected} in {sorted(names)}"
    share = covered(step, spans)
    assert share >= 0.9, f"rank {rank}: spans cover {share:.1%} of step {STEP}"
    threads = {e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert threads == {s["tid"] for s in spans}, "a track has no thread name"

    with open(os.path.join(out, "flight_recorder", f"flight_recorder_rank{rank}.json")) as f:
        record = json.load(f)
    end = step["ts"] + step["dur"]
    seen = [c for c in record["collectives"] if step["ts"] <= c["start_us"] <= end]
    assert seen, f"rank {rank}: the flight recorder saw no collective in step {STEP}"
    traced = {(s["args"]["comm"], s["args"]["sequence"]): s for s in spans
              if s["cat"] == "collective"}
    for c in seen:
        span = traced.get((c["comm"], c["sequence"]))
        assert span is not None, f"rank {rank}: {c['op']} #{c['sequence']} on {c['comm']} not traced"
        assert span["name"] == c["op"], (span, c)
        assert span["args"]["bytes"] == c["bytes"] and span["args"]["peers"] == c["peers"], (span, c)
    assert len(traced) == len(seen), f"rank {rank}: {len(traced)} traced, {len(seen)} recorded"

    snapshot_path = os.path.join(out, "memory_snapshot", f"iteration_{STEP}",
                                 f"rank{rank}_memory_snapshot.json")
    with open(snapshot_path) as f:
        snapshot = json.load(f)
    arenas = {a["arena"] for a in snapshot["allocations"]}
    # fsdp keeps the parameters and gradients in shards it allocates from the device.
    assert arenas_expected <= arenas, arenas
    assert snapshot["peak_bytes"] >= snapshot["live_bytes"] > 0, snapshot
    assert all(a["device"] == "cpu" and a["bytes"] >= 0 for a in snapshot["allocations"])
    print(f"rank {rank}: {len(spans)} spans cover {share:.1%} of step {STEP}; "
          f"{len(seen)} collectives match the flight record")


def main():
    titan_run, recipe, out, mpiexec, layout = sys.argv[1:6]
    shutil.rmtree(out, ignore_errors=True)
    result = subprocess.run(
        [mpiexec, "--oversubscribe", "--allow-run-as-root", "-np", "2", titan_run, "--recipe",
         recipe, "--training.steps=3", f"--profiling.profile_freq={STEP}",
         "--profiling.enable_profiling=true", "--profiling.enable_memory_snapshot=true",
         "--validation.freq=0", "--generate.max_new_tokens=0", "--training.local_batch_size=2",
         f"--job.dump_folder={out}", *LAYOUTS[layout][0]], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not os.path.exists(os.path.join(out, "profile_trace", "iteration_1")), "step 1 traced"
    assert not os.path.exists(os.path.join(out, "profile_trace", "iteration_3")), "step 3 traced"
    for rank in (0, 1):
        check_rank(out, rank, layout)
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
