#!/usr/bin/python3
"""Causal load balancing under context parallelism, measured: trains the debug recipe 2 steps
at cp = 4 and reads each rank's "[cp] rank R of 4: attention scored N query-key pairs" log line
(the pairs its attention kernels were given); the ranks must be within 10% of each other.

    cp_balance.py --titan-run BIN --recipe FILE --rotate-method allgather|alltoall --out DIR
"""
import argparse
import os
import re
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--titan-run", required=True)
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--rotate-method", required=True, choices=["allgather", "alltoall"])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    run = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "4", args.titan_run,
           "--recipe", args.recipe, f"--job.dump_folder={args.out}", "--training.steps=2",
           "--training.local_batch_size=4", "--training.global_batch_size=4",
           "--parallelism.context_parallel_degree=4",
           f"--parallelism.context_parallel_rotate_method={args.rotate_method}",
           "--generate.max_new_tokens=0",
           "--validation.freq=0"]
    done = subprocess.run(run, env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        print(done.stdout)
        sys.exit(f"the run failed with exit status {done.returncode}")
    pairs = {int(r): int(n) for r, n in re.findall(
        r"\[cp\] rank (\d) of 4: attention scored (\d+) query-key pairs", done.stdout)}
    if sorted(pairs) != [0, 1, 2, 3]:
        print(done.stdout)
        sys.exit(f"expected the attention work of ranks 0..3, found {sorted(pairs)}")
    method = {"allgather": "keys and values all-gathered",
              "alltoall": "keys and values passed around the ring"}[args.rotate_method]
    if done.stdout.count(method) != 4:
        print(done.stdout)
        sys.exit(f"expected every rank to log that its attention had {method}")
    low, high = min(pairs.values()), max(pairs.values())
    print(f"query-key pairs per rank: {pairs}; max / min = {high / low:.4f}")
    if high > 1.1 * low:
        sys.exit("the ranks' attention work differs by more than 10%")


if __name__ == "__main__":
    main()
