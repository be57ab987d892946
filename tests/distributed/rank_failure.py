#!/usr/bin/python3
"""Asks both ranks of a 2-rank fsdp run for their flight records with SIGUSR1, then kills one
rank mid-training and checks that the survivor gives up within [comm] train_timeout_seconds
with an error naming itself, the collective and its sequence number, and that its flight
record holds that collective as timed out.

    rank_failure.py --titan-run BIN --recipe FILE --out DIR
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from rank_processes import logged_steps, rank_processes

TIMEOUT_S = 3
# Only a guard against a hang of this script itself; nothing is asserted about speed.
GUARD_S = 300


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--titan-run", required=True)
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    trace = os.path.join(args.out, "trace")
    # --enable-recovery: mpirun keeps the survivor running, as a launcher that does not kill
    # the whole job on one death would, so that the survivor's own detection is what is tested.
    command = ["mpirun", "--enable-recovery", "--oversubscribe", "--allow-run-as-root", "-np", "2",
               args.titan_run, "--recipe", args.recipe, f"--job.dump_folder={args.out}",
               "--training.steps=1000", "--training.local_batch_size=2",
               "--generate.max_new_tokens=0", "--comm.backend=mpi",
               f"--comm.train_timeout_seconds={TIMEOUT_S}", f"--comm.trace_folder={trace}"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    job = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
    deadline = time.monotonic() + GUARD_S
    while logged_steps(args.out) < 2:
        if job.poll() is not None or time.monotonic() > deadline:
            job.kill()
            print(job.communicate()[0])
            sys.exit("the run never reached step 2")
        time.sleep(0.2)
    processes = [rank_processes(args.out, rank) for rank in (0, 1)]
    if [len(p) for p in processes] != [1, 1]:
        job.kill()
        sys.exit(f"expected one process per rank, found {processes}")
    for (pid,) in processes:
        os.kill(pid, signal.SIGUSR1)
    requested = os.path.join(trace, "flight_recorder_rank1.json")
    while not os.path.exists(requested):
        if job.poll() is not None or time.monotonic() > deadline:
            job.kill()
            print(job.communicate()[0])
            sys.exit(f"SIGUSR1 did not make rank 1 write {requested}")
        time.sleep(0.2)
    with open(requested) as f:
        record = json.load(f)
    if record.get("reason") != "SIGUSR1" or not any(
            c["state"] == "completed" for c in record["collectives"]):
        sys.exit(f"the record written on request is not one: {str(record)[:300]}")
    victims = processes[1]
    os.kill(victims[0], signal.SIGKILL)
    print(f"killed rank 1 (pid {victims[0]}) after step {logged_steps(args.out)}", flush=True)
    try:
        output, _ = job.communicate(timeout=GUARD_S)
    except subprocess.TimeoutExpired:
        job.kill()
        print(job.communicate()[0])
        sys.exit("the surviving rank hung after its peer died")
    print(output)

    # Either the collective rank 0 was waiting in timed out, or it was refused because an
    # earlier one on the same communicator (queued on the communication thread) had.
    ops = r"(all-gather|reduce-scatter|all-reduce)"
    direct = re.search(r"\[rank 0 step \d+\] .*rank 0: " + ops + r" #(\d+) on (\S+) \(2 ranks\) "
                       r"did not complete within " + str(TIMEOUT_S) + r"s", output)
    earlier = re.search(r"\[rank 0 step \d+\] .*rank 0: \S+ #\d+ on (\S+) \(2 ranks\): the "
                        r"communicator is unusable after an earlier " + ops + r" #(\d+) that did "
                        r"not complete within " + str(TIMEOUT_S) + r"s", output)
    if direct:
        op, sequence, comm = direct.group(1), int(direct.group(2)), direct.group(3)
    elif earlier:
        op, sequence, comm = earlier.group(2), int(earlier.group(3)), earlier.group(1)
    else:
        sys.exit("rank 0 did not report the collective that timed out, naming itself, "
                 "the collective and its sequence number")
    record_path = os.path.join(trace, "flight_recorder_rank0.json")
    if record_path not in output:
        sys.exit(f"the error does not name the flight record {record_path}")
    with open(record_path) as f:
        record = json.load(f)
    timed_out = [c for c in record["collectives"] if c["state"] == "timed out"]
    matching = [c for c in timed_out if (c["op"], c["sequence"], c["comm"]) == (op, sequence, comm)]
    if not matching:
        sys.exit(f"the flight record's timed-out collectives {timed_out} do not include the "
                 f"reported {op} #{sequence} on {comm}")
    last = matching[0]
    if sorted(last["peers"]) != [0, 1]:
        sys.exit(f"the timed-out collective's peers are {last['peers']}, expected [0, 1]")
    print(f"ok: rank 0 gave up on {op} #{sequence} on {comm} and recorded it")


if __name__ == "__main__":
    main()
