#!/usr/bin/python3
"""Expert parallelism's all-to-all traffic and time per training step, by ep degree.

  bench/moe_all_to_all.py [--build DIR] [--ranks 4] [--steps 6] [--degrees 1,2,4]

Trains recipes/qwen3_moe_debug.toml (8 experts, 2 per token) on RANKS ranks under fsdp, with
parallelism.expert_parallel_degree set to each degree, profiling the last step; reads rank 0's
trace of that step (the comm plugin's "all-to-all" spans, their bytes sent and received) and its
step time. Prints a markdown table and the CPU it ran on. Rank 0 stands for all: the routing
decides how many rows each rank sends, so the figures differ a little between ranks.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def cpu():
    with open("/proc/cpuinfo") as f:
        info = f.read()
    model = re.search(r"model name\s*:\s*(.*)", info).group(1)
    flags = set(re.search(r"flags\s*:\s*(.*)", info).group(1).split())
    wanted = [f for f in ("avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return f"{model}, {os.cpu_count()} cores; flags: {' '.join(wanted) or 'none of avx512f, avx512_bf16, amx_bf16'}"


def run(build, ranks, steps, degree, out):
    command = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(ranks),
               os.path.join(build, "bin", "titan-run"), "--recipe",
               os.path.join(ROOT, "recipes", "qwen3_moe_debug.toml"), f"--job.dump_folder={out}",
               f"--training.steps={steps}", "--training.local_batch_size=1",
               "--validation.freq=0", "--generate.max_new_tokens=0",
               f"--parallelism.expert_parallel_degree={degree}",
               "--profiling.enable_profiling=true", f"--profiling.profile_freq={steps}"]
    done = subprocess.run(command, env=dict(os.environ, OMP_NUM_THREADS="1"),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        print(done.stdout[-3000:])
        sys.exit(f"ep {degree}: titan-run failed with exit status {done.returncode}")
    trace = os.path.join(out, "profile_trace", f"iteration_{steps}", "rank0_trace.json")
    with open(trace) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    spans = [e for e in events if e.get("ph") == "X" and e.get("name") == "all-to-all"]
    moved = sum(e.get("args", {}).get("bytes", 0) for e in spans)
    seconds = sum(e["dur"] for e in spans) / 1e6
    step = [e["dur"] / 1e6 for e in events if e.get("ph") == "X" and e.get("cat") == "step"]
    step = step[0] if step else None
    return len(spans), moved, seconds, step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--degrees", default="1,2,4")
    args = parser.parse_args()
    print(f"CPU: {cpu()}\n")
    print(f"qwen3 debugmodel_moe (8 experts, 2 per token), {args.ranks} ranks, 1 sequence of 128 "
          "tokens each, step", args.steps)
    print()
    print("| ep | all-to-alls per step | MB sent + received by rank 0 | all-to-all time (s) | "
          "step (s) |")
    print("|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as work:
        for degree in (int(d) for d in args.degrees.split(",")):
            calls, moved, seconds, step = run(args.build, args.ranks, args.steps, degree,
                                              os.path.join(work, f"ep{degree}"))
            step_text = f"{step:.3f}" if step is not None else "?"
            print(f"| {degree} | {calls} | {moved / 1e6:.2f} | {seconds:.3f} | {step_text} |")


if __name__ == "__main__":
    main()
