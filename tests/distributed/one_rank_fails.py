#!/usr/bin/python3
"""One rank of a 2-rank fsdp run fails alone mid-training (its profiler trace cannot be written:
a file size limit on that rank only); the job must end at once, not after the other rank waits
out its collective for comm.train_timeout_seconds.

    one_rank_fails.py --titan-run BIN --recipe FILE --out DIR

Under the default mpirun, the failing rank names its error, ends without MPI_Finalize (which
would wait for the other rank) and mpirun stops the other rank. The train timeout is set far
beyond this script's guard, so a job that waits for it fails here; the other rank must not
report a timed-out collective either.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

# Longer than the guard: only a job ended by the failing rank finishes within the guard.
TRAIN_TIMEOUT_S = 3600
# Only a guard against a hang; nothing is asserted about speed.
GUARD_S = 300
# Rank 1 ignores SIGXFSZ and may write files of 512 bytes at most: its trace of step 2 fails.
LIMIT_RANK_1 = ('trap "" XFSZ; if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then ulimit -f 1; fi; '
                'exec "$0" "$@"')


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--titan-run", required=True)
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    command = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", "2",
               "sh", "-c", LIMIT_RANK_1, args.titan_run, "--recipe", args.recipe,
               f"--job.dump_folder={args.out}", "--training.steps=1000",
               "--training.local_batch_size=2", "--generate.max_new_tokens=0",
               "--validation.freq=0", "--parallelism.data_parallel_shard_degree=2",
               "--comm.backend=mpi", f"--comm.train_timeout_seconds={TRAIN_TIMEOUT_S}",
               "--profiling.enable_profiling=true", "--profiling.profile_freq=2"]
    print(" ".join(command), flush=True)
    try:
        run = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=GUARD_S, env=dict(os.environ, OMP_NUM_THREADS="1"))
    except subprocess.TimeoutExpired as e:
        print(e.stdout or "")
        sys.exit(f"the job did not end within {GUARD_S} s of rank 1's failure: rank 0 waits for "
                 "it in a collective")
    output = run.stdout
    print(output)
    expect = [
        (r"\[error\] \[rank 1 step 2\] .*cannot write the trace of step 2", "rank 1 names its error"),
        (r"\[rank 1 step 2\] ending this rank now \(exit status 1\)", "rank 1 ends at once"),
        (r"Process name: \[\[[0-9]+,1\],1\]\s+Exit code:\s+1",
         "mpirun names rank 1 as the first process to fail"),
    ]
    for pattern, what in expect:
        if not re.search(pattern, output):
            sys.exit(f"expected: {what} ({pattern!r})")
        print(f"ok: {what}")
    if run.returncode != 1:
        sys.exit(f"mpirun exited {run.returncode}, expected rank 1's status 1")
    if "did not complete within" in output:
        sys.exit("rank 0 waited out a collective instead of being stopped by mpirun")
    if re.search(r"\[rank 0 step [0-9]+\] loss", output) is None:
        sys.exit("rank 0 never trained a step: the failure was not mid-training")
    shutil.rmtree(args.out)


if __name__ == "__main__":
    main()
