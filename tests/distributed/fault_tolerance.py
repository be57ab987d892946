#!/usr/bin/python3
"""Replica groups of fault_tolerance, each its own launch, on this machine (docs/fault-tolerance.md).

    fault_tolerance.py --titan-run BIN --recipe FILE --out DIR --case CASE

ddp, hsdp: groups that all live train as one launch with dp_replicate = the groups would.
kill_mid_round: a group killed (SIGKILL) after joining a step's quorum, before the all-reduce:
  the survivors redo the step without it, and their losses equal those of a run whose group died
  before joining that step (it never took part in it).
kill_external, kill_group_of_two: kill -9 of a group's process (of its lead rank, under mpirun)
  from outside, whenever it has trained a few steps: the others finish every step, agreeing.
rejoin: a group killed at step 3 is restarted and rejoins after step 5 (the quorum of step 5
  waits for it: TITAN_TEST_FT_ADMIT_AT_STEP), taking a live group's state; every group's losses
  from step 6 on and its final weights equal those of three groups started at step 6 from the
  checkpoints the survivors saved after step 5 (the rejoining group from group 0's): the state
  sent over the wire is the checkpoint's, and nothing on disk was needed for the rejoin.
soak (its own label, ft_soak): --kills kills and rejoins (the suite runs 6, every group killed
  twice, once before and once after joining; 30 for a longer soak), a group killed every 20 steps in turn at
  a point of the step chosen in advance, started again at once and admitted by the next
  multiple of 20 (that step's quorum waits for it): no hang, no step lost, every process agreeing on every step's loss, the final weights
  the same in every group, and the last checkpoints resuming exactly.
local_sgd: semi_sync_method = "local_sgd" with sync_steps = 1 and plain SGD trains as averaging
  the gradients every step does; with sync_steps = 3 the groups differ between syncs and agree
  at them, and a group killed at a sync step leaves the others to finish, agreeing.
min_replica_size: fewer groups alive than fault_tolerance.min_replica_size stops the survivor
  with an error naming the key, never a hang.
Nothing here depends on speed: the timeouts are generous and only results are asserted.
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

from rank_processes import logged_steps

GUARD_S = 900  # only a guard against a hang of this script itself
TIMEOUTS = ["--fault_tolerance.heartbeat_timeout_ms=15000",
            "--fault_tolerance.process_group_timeout_ms=120000",
            "--fault_tolerance.join_timeout_ms=300000"]


def losses(folder, after=0):
    """The training losses logged in folder's metrics.jsonl, of the steps after `after`."""
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if '"loss"' in line]
    return [row["loss"] for row in rows if row["step"] > after]


class Job:
    def __init__(self, args, out, steps, extra=()):
        self.args, self.out, self.steps, self.extra = args, out, steps, list(extra)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)

    def command(self, folder):
        return [self.args.titan_run, "--recipe", self.args.recipe, f"--job.dump_folder={folder}",
                f"--training.steps={self.steps}", "--training.local_batch_size=2",
                "--generate.max_new_tokens=0", "--validation.freq=0"] + self.extra

    def launch(self, command, ranks, env=None, log=None):
        """Starts `command`; its output goes to a pipe, or to the file `log` (long runs)."""
        if ranks > 1:
            command = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(ranks)] + \
                command + ["--comm.backend=mpi"]
        env = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
        output = open(log, "w") if log else subprocess.PIPE
        return subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT,
                                text=True)

    def groups(self, count, ranks=1, env=None, min_replica_size=1, only=None, folder=None,
               log=None):
        """Launches `count` replica groups of `ranks` ranks each (those in `only`, if given);
        returns their processes."""
        store = os.path.join(self.out, "store")
        return [self.launch(self.command(folder or self.group_folder(g)) + TIMEOUTS + [
            "--fault_tolerance.enable=true", f"--fault_tolerance.replica_id={g}",
            f"--fault_tolerance.group_size={count}", f"--fault_tolerance.store_folder={store}",
            f"--fault_tolerance.min_replica_size={min_replica_size}"], ranks, env, log)
            for g in (only if only is not None else range(count))]

    def group_folder(self, group):
        return os.path.join(self.out, f"g{group}")


def finish(processes):
    """Each process's (exit code, output)."""
    results = []
    for process in processes:
        try:
            output, _ = process.communicate(timeout=GUARD_S)
        except subprocess.TimeoutExpired:
            for p in processes:
                p.kill()
            sys.exit("a replica group hung")
        results.append((process.returncode, output))
    return results


def expect(condition, message, outputs=()):
    if not condition:
        for output in outputs:
            print(output[-6000:])
        sys.exit(message)


def same_as_one_launch(args, ranks_per_group):
    """Two groups of `ranks_per_group` ranks (fsdp within each) against one launch of twice the
    ranks with data_parallel_replicate_degree = 2."""
    job = Job(args, os.path.join(args.out, f"groups_of_{ranks_per_group}"), steps=4)
    results = finish(job.groups(2, ranks_per_group))
    expect(all(code == 0 for code, _ in results), "a replica group failed",
           [o for _, o in results])
    one = os.path.join(job.out, "one_launch")
    reference = finish([job.launch(job.command(one) + [
        "--parallelism.data_parallel_replicate_degree=2"], 2 * ranks_per_group)])
    expect(reference[0][0] == 0, "the one-launch run failed", [reference[0][1]])
    want = losses(one)
    for g in range(2):
        got = losses(job.group_folder(g))
        expect(len(got) == 4 and all(abs(a - b) <= 1e-5 for a, b in zip(got, want)),
               f"group {g}'s losses {got} differ from one launch's {want}")
    print(f"two groups of {ranks_per_group} rank(s) train as one launch: {want}")


def kill_mid_round(args):
    runs = {}
    for point in ("after_join", "before_join"):
        job = Job(args, os.path.join(args.out, point), steps=6)
        results = finish(job.groups(3, env={"TITAN_TEST_FT_KILL": f"2:3:{point}"}))
        outputs = [o for _, o in results]
        expect(results[2][0] == -signal.SIGKILL, f"group 2 did not die at step 3 ({point})",
               outputs)
        expect(results[0][0] == 0 and results[1][0] == 0,
               f"a survivor failed after group 2 died ({point})", outputs)
        survivors = [losses(job.group_folder(g)) for g in (0, 1)]
        expect(len(survivors[0]) == 6 and survivors[0] == survivors[1],
               f"the survivors disagree or stopped early ({point}): {survivors}", outputs)
        redone = "did not commit; redoing it" in outputs[0]
        expect(redone == (point == "after_join"),
               f"group 2 dying {point} should {'' if point == 'after_join' else 'not '}make "
               f"the survivors redo step 3", outputs)
        expect("the quorum is now group(s) [0, 1]" in outputs[0],
               f"no quorum [0, 1] logged ({point})", outputs)
        runs[point] = survivors[0]
    expect(runs["after_join"] == runs["before_join"],
           f"a step redone without the dead group differs from one it never joined: {runs}")
    print(f"the survivors' losses, with the step redone or not: {runs['after_join']}")


def kill_external(args, ranks_per_group):
    job = Job(args, os.path.join(args.out, f"external_{ranks_per_group}"), steps=24)
    processes = job.groups(3, ranks_per_group)
    victim = 1
    deadline = time.monotonic() + GUARD_S
    while logged_steps(job.group_folder(victim)) < 3:
        expect(time.monotonic() < deadline and processes[victim].poll() is None,
               "group 1 never reached step 3")
        time.sleep(0.2)
    # The lead rank's titan-run (under mpirun, its launcher then ends the group's other rank).
    marker = job.group_folder(victim)
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().decode(errors="replace").split("\0")
            with open(f"/proc/{pid}/environ", "rb") as f:
                environ = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if cmdline[0].endswith("titan-run") and f"--job.dump_folder={marker}" in cmdline and (
                ranks_per_group == 1 or "OMPI_COMM_WORLD_RANK=0" in environ):
            pids.append(int(pid))
    expect(len(pids) == 1, f"expected group 1's lead process, found {pids}")
    os.kill(pids[0], signal.SIGKILL)
    print(f"killed group 1's lead (pid {pids[0]}) after step {logged_steps(marker)}", flush=True)
    results = finish(processes)
    outputs = [o for _, o in results]
    expect(results[victim][0] != 0, "group 1 survived its kill", outputs)
    expect(results[0][0] == 0 and results[2][0] == 0, "a survivor failed", outputs)
    survivors = [losses(job.group_folder(g)) for g in (0, 2)]
    expect(len(survivors[0]) == 24 and survivors[0] == survivors[1],
           f"the survivors disagree or stopped early: {survivors}", outputs)
    expect("the quorum is now group(s) [0, 2]" in outputs[0], "no quorum [0, 2] logged", outputs)
    print(f"groups 0 and 2 finished 24 steps after group 1 was killed: {survivors[0]}")


def rejoin(args):
    checkpoints = ["--checkpoint.enable=true", "--checkpoint.interval=5"]
    job = Job(args, os.path.join(args.out, "rejoin"), steps=10, extra=checkpoints)
    hold = {"TITAN_TEST_FT_ADMIT_AT_STEP": "5"}
    survivors = job.groups(3, env=hold, only=[0, 1])
    killed = finish(job.groups(3, env=dict(hold, TITAN_TEST_FT_KILL="2:3:before_join"),
                               only=[2]))
    expect(killed[0][0] == -signal.SIGKILL, "group 2 did not die at step 3", [killed[0][1]])
    back = os.path.join(job.out, "g2_back")
    results = finish(survivors + job.groups(3, env=hold, only=[2], folder=back))
    outputs = [o for _, o in results]
    expect(all(code == 0 for code, _ in results), "a group failed", outputs)
    expect("receiving the state after step 5 from group 0" in outputs[2],
           "group 2 did not rejoin after step 5 from group 0", outputs)
    live = [losses(job.group_folder(0)), losses(job.group_folder(1)), losses(back)]
    expect(len(live[0]) == 10 and live[0] == live[1] and live[2] == live[0][5:],
           f"the groups disagree after the rejoin: {live}", outputs)

    # Three groups from the survivors' step-5 checkpoints (group 2 from group 0's).
    reference = Job(args, os.path.join(args.out, "rejoin_reference"), steps=10, extra=checkpoints)
    for g, source in ((0, 0), (1, 1), (2, 0)):
        shutil.copytree(os.path.join(job.group_folder(source), "checkpoint", "step-5"),
                        os.path.join(reference.group_folder(g), "checkpoint", "step-5"))
    results = finish(reference.groups(3))
    expect(all(code == 0 for code, _ in results), "a group resumed from step 5 failed",
           [o for _, o in results])
    for g in range(3):
        resumed = losses(reference.group_folder(g), after=5)
        expect(resumed == live[0][5:], f"group {g} resumed from disk: {resumed}, rejoined over "
               f"the wire: {live[0][5:]}")
    arenas = set()
    for folder in [job.group_folder(0), job.group_folder(1), back] + \
            [reference.group_folder(g) for g in range(3)]:
        with open(os.path.join(folder, "model.arena"), "rb") as f:
            arenas.add(f.read())
    expect(len(arenas) == 1, "the final weights differ between the groups or the two runs")
    print(f"rejoined after step 5; losses from step 6 as resumed from disk: {live[0][5:]}")


def soak(args):
    kills, every = args.kills, 20
    steps = every * (kills + 1)
    schedule = [(i % 3, every * i + 5, "after_join" if i % 2 else "before_join")
                for i in range(kills)]
    env = {"TITAN_TEST_FT_KILL": ",".join(f"{g}:{at}:{point}" for g, at, point in schedule),
           "TITAN_TEST_FT_ADMIT_AT_STEP": ",".join(str(every * (i + 1)) for i in range(kills))}
    checkpoints = ["--checkpoint.enable=true", f"--checkpoint.interval={steps - 10}"]
    job = Job(args, os.path.join(args.out, "soak"), steps=steps, extra=checkpoints)
    incarnations = {g: [] for g in range(3)}  # each group's dump folders, oldest first
    running = {}

    def start(group):
        folder = os.path.join(job.out, f"g{group}_{len(incarnations[group])}")
        incarnations[group].append(folder)
        running[group] = job.groups(3, env=env, only=[group], folder=folder,
                                    log=folder + ".log")[0]

    def log_of(folder):
        with open(folder + ".log") as f:
            return f.read()

    for g in range(3):
        start(g)
    killed = 0
    deadline = time.monotonic() + GUARD_S * 3
    while running:
        for group, process in list(running.items()):
            code = process.poll()
            if code is None:
                continue
            del running[group]
            folder = incarnations[group][-1]
            if code == -signal.SIGKILL and killed < kills:
                g, at, point = schedule[killed]
                expect(g == group and f"kills itself at step {at} ({point})" in log_of(folder),
                       f"kill {killed} should have been group {g} at step {at} ({point}); "
                       f"group {group} died", [log_of(folder)])
                killed += 1
                start(group)
            elif code != 0:
                for p in running.values():
                    p.kill()
                expect(False, f"group {group} failed ({code})", [log_of(folder)])
        if time.monotonic() > deadline:
            for p in running.values():
                p.kill()
            expect(False, f"the soak hung after {killed} kills")
        time.sleep(0.2)
    expect(killed == kills, f"{killed} kills, expected {kills}")

    by_step = {}
    for group, folders in incarnations.items():
        for folder in folders:
            with open(os.path.join(folder, "metrics.jsonl")) as f:
                rows = [json.loads(line) for line in f if '"loss"' in line]
            logged = [row["step"] for row in rows]
            expect(logged == list(range(logged[0], logged[0] + len(logged))) if logged else True,
                   f"{folder} lost steps: {logged}")
            for row in rows:
                by_step.setdefault(row["step"], set()).add(row["loss"])
        expect(logged and logged[-1] == steps, f"group {group}'s last process ended early")
    expect(sorted(by_step) == list(range(1, steps + 1)), "some step was trained by no group")
    expect(all(len(values) == 1 for values in by_step.values()),
           "processes disagree on a step's loss")

    reference = Job(args, os.path.join(args.out, "soak_reference"), steps=steps,
                    extra=checkpoints)
    for g in range(3):
        shutil.copytree(os.path.join(incarnations[g][-1], "checkpoint", f"step-{steps - 10}"),
                        os.path.join(reference.group_folder(g), "checkpoint",
                                     f"step-{steps - 10}"))
    results = finish(reference.groups(3))
    expect(all(code == 0 for code, _ in results), "a group resumed from a checkpoint failed",
           [o for _, o in results])
    arenas = set()
    for folder in [incarnations[g][-1] for g in range(3)] + \
            [reference.group_folder(g) for g in range(3)]:
        with open(os.path.join(folder, "model.arena"), "rb") as f:
            arenas.add(f.read())
    for g in range(3):
        resumed = losses(reference.group_folder(g), after=steps - 10)
        expect(resumed == [next(iter(by_step[s])) for s in range(steps - 9, steps + 1)],
               f"group {g} resumed from step {steps - 10} logs other losses: {resumed}")
    expect(len(arenas) == 1, "the final weights differ between groups or from the resumed run")
    print(f"{kills} kills and rejoins over {steps} steps; every process agreed, and the last "
          f"checkpoints resume exactly")


def local_sgd(args):
    # Plain SGD, no clipping: averaging parameters after one step is averaging the gradients.
    sgd = os.path.join(args.out, "sgd.toml")
    with open(args.recipe) as f, open(sgd, "w") as out:
        out.writelines(line for line in f if not line.startswith("eps ="))
    plain = ["--optimizer.name=sgd", "--optimizer.lr=0.5", "--training.max_norm=0"]
    runs = {}
    for name, extra in (("every_step", []), ("local_sgd_1", [
            "--fault_tolerance.semi_sync_method=local_sgd", "--fault_tolerance.sync_steps=1"])):
        job = Job(argparse.Namespace(titan_run=args.titan_run, recipe=sgd),
                  os.path.join(args.out, name), steps=4, extra=plain + extra)
        results = finish(job.groups(2))
        expect(all(code == 0 for code, _ in results), f"{name} failed", [o for _, o in results])
        runs[name] = [losses(job.group_folder(g)) for g in range(2)]
    want = runs["every_step"][0]
    for got in runs["local_sgd_1"]:
        expect(len(got) == 4 and all(abs(a - b) <= 1e-5 for a, b in zip(got, want)),
               f"LocalSGD every step: {got}; the gradients averaged every step: {want}")

    sync3 = ["--fault_tolerance.semi_sync_method=local_sgd", "--fault_tolerance.sync_steps=3"]
    job = Job(args, os.path.join(args.out, "local_sgd_3"), steps=6, extra=sync3)
    results = finish(job.groups(3, env={"TITAN_TEST_FT_KILL": "2:6:after_join"}))
    outputs = [o for _, o in results]
    expect(results[2][0] == -signal.SIGKILL and results[0][0] == 0 and results[1][0] == 0,
           "group 2 should die at step 6's sync and the others finish", outputs)
    logged = [losses(job.group_folder(g)) for g in range(2)]
    expect(logged[0][2] == logged[1][2] and logged[0][5] == logged[1][5],
           f"the groups' losses differ at the syncs (steps 3, 6): {logged}", outputs)
    expect(logged[0][0] != logged[1][0] and logged[0][3] != logged[1][3],
           f"the groups' losses agree between syncs: {logged}", outputs)
    arenas = set()
    for g in range(2):
        with open(os.path.join(job.group_folder(g), "model.arena"), "rb") as f:
            arenas.add(f.read())
    expect(len(arenas) == 1, "the survivors' weights differ after the last sync", outputs)
    print(f"LocalSGD every step trains as every-step averaging: {want}; every 3 steps: {logged}")


def min_replica_size(args):
    job = Job(args, os.path.join(args.out, "min_replica_size"), steps=6)
    results = finish(job.groups(2, env={"TITAN_TEST_FT_KILL": "1:3:before_join"},
                                min_replica_size=2))
    code, output = results[0]
    expect(code != 0 and re.search(r"fewer than fault_tolerance\.min_replica_size = 2", output),
           "group 0 went on alone, or failed without naming min_replica_size", [output])
    print("group 0 stopped: fewer groups than fault_tolerance.min_replica_size")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--titan-run", required=True)
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--case", required=True,
                        choices=["ddp", "hsdp", "kill_mid_round", "kill_external",
                                 "kill_group_of_two", "rejoin", "soak", "local_sgd",
                                 "min_replica_size"])
    parser.add_argument("--kills", type=int, default=30, help="soak: kills and rejoins")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    {"ddp": lambda: same_as_one_launch(args, 1),
     "hsdp": lambda: same_as_one_launch(args, 2),
     "kill_mid_round": lambda: kill_mid_round(args),
     "kill_external": lambda: kill_external(args, 1),
     "kill_group_of_two": lambda: kill_external(args, 2),
     "rejoin": lambda: rejoin(args),
     "soak": lambda: soak(args),
     "local_sgd": lambda: local_sgd(args),
     "min_replica_size": lambda: min_replica_size(args)}[args.case]()
    # Passed (a failure exits above): the groups' folders (checkpoints, up to 1 GB) go.
    shutil.rmtree(args.out)


if __name__ == "__main__":
    main()
