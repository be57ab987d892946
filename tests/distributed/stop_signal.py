#!/usr/bin/python3
"""A 2-rank fsdp run with checkpointing, sent SIGTERM on rank 1 alone once rank 0 has logged a
step (as a launcher that reaches the ranks at different times would): both ranks must agree to
stop after the same step, save the checkpoint of that step and exit with 3.

    stop_signal.py --titan-run BIN --recipe FILE --out DIR
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from rank_processes import logged_steps, rank_processes

# Only a guard against a hang of this script itself; nothing is asserted about speed.
GUARD_S = 300


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--titan-run", required=True)
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    command = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2", args.titan_run,
               "--recipe", args.recipe, f"--job.dump_folder={args.out}",
               "--training.steps=100000", "--training.local_batch_size=2",
               "--training.seq_len=32", "--model.tokenizer_path=byte", "--validation.freq=0",
               "--generate.max_new_tokens=0", "--metrics.log_freq=1",
               "--checkpoint.enable=true", "--checkpoint.interval=100000"]
    job = subprocess.Popen(command, env=dict(os.environ, OMP_NUM_THREADS="1"),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + GUARD_S
    while logged_steps(args.out) < 1:
        if job.poll() is not None or time.monotonic() > deadline:
            job.kill()
            print(job.communicate()[0])
            sys.exit("the run never logged a step")
        time.sleep(0.1)
    pids = rank_processes(args.out, 1)
    if not pids:
        job.kill()
        sys.exit("rank 1's process not found")
    os.kill(pids[0], signal.SIGTERM)
    try:
        output, _ = job.communicate(timeout=GUARD_S)
    except subprocess.TimeoutExpired:
        job.kill()
        print(job.communicate()[0])
        sys.exit("the run did not stop after SIGTERM")
    print(output)
    if job.returncode != 3:
        sys.exit(f"mpirun exited with {job.returncode}, expected 3 (stopped after a clean save)")
    steps = {}
    for rank, by in ((0, "another rank's signal"), (1, "SIGTERM")):
        found = re.search(rf"\[rank {rank} step -\] .*stopped by {re.escape(by)} after step "
                          r"(\d+) of 100000; its checkpoint is saved", output)
        if not found:
            sys.exit(f"rank {rank} did not report its stop by {by}")
        steps[rank] = int(found.group(1))
    if steps[0] != steps[1]:
        sys.exit(f"the ranks stopped after different steps: {steps}")
    step = steps[0]
    metadata = os.path.join(args.out, "checkpoint", f"step-{step}", "metadata.json")
    if not os.path.exists(metadata):
        sys.exit(f"no complete checkpoint of step {step}: {metadata} is missing")
    if logged_steps(args.out) != step:
        sys.exit(f"metrics.jsonl holds {logged_steps(args.out)} steps, expected {step}")
    print(f"ok: both ranks stopped after step {step} and saved its checkpoint")


if __name__ == "__main__":
    main()
