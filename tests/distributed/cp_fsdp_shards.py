#!/usr/bin/python3
"""fsdp shards over dp_shard flattened with cp (TorchTitan's dp_shard_cp), measured: the debug
recipe one step on 4 ranks as cp 2 x fsdp 2 and as fsdp 4; each rank's "[memory] parameters,
gradients and optimizer state: X MiB" must be the same in both (a quarter of the model's state
each), not twice as much under cp.

    cp_fsdp_shards.py --titan-run BIN --recipe FILE --out DIR
"""
import argparse
import os
import re
import subprocess
import sys


def state_mib(args, name, overrides):
    run = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "4", args.titan_run,
           "--recipe", args.recipe, f"--job.dump_folder={os.path.join(args.out, name)}",
           "--training.steps=1", "--training.local_batch_size=2", "--generate.max_new_tokens=0",
           "--validation.freq=0", *overrides]
    done = subprocess.run(run, env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        print(done.stdout)
        sys.exit(f"{name}: the run failed with exit status {done.returncode}")
    sizes = {float(x) for x in re.findall(
        r"\[memory\] parameters, gradients and optimizer state: ([0-9.]+) MiB", done.stdout)}
    if len(sizes) != 1:
        print(done.stdout)
        sys.exit(f"{name}: expected one state size on every rank, found {sorted(sizes)}")
    return sizes.pop()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--titan-run", required=True)
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    cp = state_mib(args, "cp2_fsdp2", ["--parallelism.context_parallel_degree=2",
                                      "--training.global_batch_size=4"])
    fsdp = state_mib(args, "fsdp4", ["--training.global_batch_size=8"])
    print(f"state per rank: cp 2 x fsdp 2 {cp} MiB, fsdp 4 {fsdp} MiB")
    if abs(cp - fsdp) > 0.01 * fsdp:
        sys.exit("fsdp under cp does not shard over dp_shard x cp")


if __name__ == "__main__":
    main()
