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
diloco: semi_sync_method = "diloco". One group syncing every step with inner SGD of lr 0.5 trains
  as plain SGD of lr 0.7 x 0.5 with Nesterov momentum 0.9 (the outer step is that SGD step), and
  with fragment_update_alpha = 1 as the inner SGD alone; an outer lr of 1 without momentum
  trains as LocalSGD; groups resumed from checkpoints taken
  between syncs (the synced parameters and the momentum saved beside the live ones) train as the
  uninterrupted groups, to the bit.
diloco_rejoin: under DiLoCo, a group killed in a sync and started again is admitted at a later
  sync with the live outer state, and after the last sync every group holds the same weights.
etcd_lighthouse: the quorum in a three-member etcd cluster; a node lost (a group and the etcd
  member beside it) leaves the others to go on, and the group started again rejoins through the
  members left, as with a store folder.
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

from etcd_cluster import EtcdCluster
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
    def __init__(self, args, out, steps, extra=(), etcd=None):
        """With `etcd` (an EtcdCluster) the quorum lives there instead of a store folder."""
        self.args, self.out, self.steps, self.extra = args, out, steps, list(extra)
        self.etcd = etcd
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)

    def lighthouse(self, group):
        if self.etcd is None:
            return [f"--fault_tolerance.store_folder={os.path.join(self.out, 'store')}"]
        # Each group asks the member beside it first (as on its own node), then the others.
        endpoints = self.etcd.endpoints[group:] + self.etcd.endpoints[:group]
        return ["--fault_tolerance.etcd_endpoints=" + ",".join(endpoints),
                f"--fault_tolerance.etcd_prefix=/titan/{os.path.basename(self.out)}"]

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
        return [self.launch(self.command(folder or self.group_folder(g)) + TIMEOUTS + [
            "--fault_tolerance.enable=true", f"--fault_tolerance.replica_id={g}",
            f"--fault_tolerance.group_size={count}",
            f"--fault_tolerance.min_replica_size={min_replica_size}"] + self.lighthouse(g),
            ranks, env, log)
            for g in (only if only is not None else range(count))]

    def group_folder(self, group):
        return os.path.join(self.out, f"g{group}")

    def kill_and_rejoin(self, victim, kill_at, admit_at, while_down=None):
        """Three groups; `victim` is killed at `kill_at` ("<step>:<point>"), started again at once
        into the folder g<victim>_back and admitted after step `admit_at` (that step's quorum
        waits for it); `while_down`, if given, runs in between (a lost node's other losses).
        Every group must end well and the victim must take group 0's state after `admit_at`.
        Returns the back folder and the outputs: the survivors', then the restarted group's."""
        hold = {"TITAN_TEST_FT_ADMIT_AT_STEP": str(admit_at)}
        survivors = self.groups(3, env=hold, only=[g for g in range(3) if g != victim])
        killed = finish(self.groups(3, env=dict(hold, TITAN_TEST_FT_KILL=f"{victim}:{kill_at}"),
                                    only=[victim]))
        expect(killed[0][0] == -signal.SIGKILL,
               f"group {victim} did not die in step {kill_at.split(':')[0]}", [killed[0][1]])
        if while_down is not None:
            while_down()
        back = os.path.join(self.out, f"g{victim}_back")
        results = finish(survivors + self.groups(3, env=hold, only=[victim], folder=back))
        outputs = [o for _, o in results]
        expect(all(code == 0 for code, _ in results), "a group failed", outputs)
        expect(f"receiving the state after step {admit_at} from group 0" in outputs[2],
               f"group {victim} did not rejoin after step {admit_at} from group 0", outputs)
        return back, outputs


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
    back, outputs = job.kill_and_rejoin(2, "3:before_join", admit_at=5)
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
    sgd = sgd_recipe(args)
    plain = ["--optimizer.name=sgd", "--optimizer.lr=0.5", "--training.max_norm=0"]
    runs = {}
    for name, extra in (("every_step", []), ("local_sgd_1", [
            "--fault_tolerance.semi_sync_method=local_sgd", "--fault_tolerance.sync_steps=1"])):
        job = Job(sgd, os.path.join(args.out, name), steps=4, extra=plain + extra)
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
    expect(len(final_weights([job.group_folder(g) for g in range(2)])) == 1,
           "the survivors' weights differ after the last sync", outputs)
    print(f"LocalSGD every step trains as every-step averaging: {want}; every 3 steps: {logged}")


def sgd_recipe(args):
    """The recipe without AdamW's eps (which SGD refuses)."""
    sgd = os.path.join(args.out, "sgd.toml")
    with open(args.recipe) as f, open(sgd, "w") as out:
        out.writelines(line for line in f if not line.startswith("eps ="))
    return argparse.Namespace(titan_run=args.titan_run, recipe=sgd)


def diloco_flags(sync_steps, *extra):
    return ["--fault_tolerance.semi_sync_method=diloco",
            f"--fault_tolerance.sync_steps={sync_steps}"] + [f"--fault_tolerance.{e}" for e in extra]


def final_weights(folders):
    arenas = set()
    for folder in folders:
        with open(os.path.join(folder, "model.arena"), "rb") as f:
            arenas.add(f.read())
    return arenas


def close(got, want, tolerance):
    return len(got) == len(want) and all(abs(a - b) <= tolerance for a, b in zip(got, want))


def diloco(args):
    sgd = sgd_recipe(args)
    # A constant lr: the outer lr multiplies the inner one only while neither changes.
    constant = ["--optimizer.name=sgd", "--training.max_norm=0", "--lr_scheduler.warmup_steps=0",
                "--lr_scheduler.decay_type=constant"]
    job = Job(sgd, os.path.join(args.out, "diloco_every_step"), steps=5,
              extra=constant + ["--optimizer.lr=0.5"] + diloco_flags(1))
    results = finish(job.groups(1))
    expect(results[0][0] == 0, "DiLoCo with one group failed", [results[0][1]])
    nesterov = os.path.join(job.out, "nesterov_sgd")
    reference = finish([job.launch(Job(sgd, nesterov, steps=5).command(nesterov) + constant + [
        "--optimizer.lr=0.35", "--optimizer.momentum=0.9", "--optimizer.nesterov=true"], 1)])
    expect(reference[0][0] == 0, "plain Nesterov SGD failed", [reference[0][1]])
    got, want = losses(job.group_folder(0)), losses(nesterov)
    expect(close(got, want, 1e-5) and want[-1] < want[0] - 0.1,
           f"DiLoCo every step: {got}; SGD of lr 0.35 with Nesterov momentum 0.9: {want}")
    # fragment_update_alpha = 1 keeps the local parameters: the inner SGD alone.
    local = Job(sgd, os.path.join(args.out, "diloco_alpha_1"), steps=5, extra=constant + [
        "--optimizer.lr=0.5"] + diloco_flags(1, "fragment_update_alpha=1"))
    inner = os.path.join(local.out, "inner_sgd")
    results = finish(local.groups(1) + [local.launch(Job(sgd, inner, steps=5).command(inner) +
                                                     constant + ["--optimizer.lr=0.5"], 1)])
    expect(all(code == 0 for code, _ in results), "a run of fragment_update_alpha = 1 failed",
           [o for _, o in results])
    kept, alone = losses(local.group_folder(0)), losses(inner)
    expect(kept == alone and kept != got,
           f"fragment_update_alpha = 1: {kept}; the inner SGD alone: {alone}")

    runs = {}
    for name, extra in (("local_sgd", ["--fault_tolerance.semi_sync_method=local_sgd",
                                       "--fault_tolerance.sync_steps=3"]),
                        ("diloco_lr1", diloco_flags(3, "outer_lr=1", "outer_momentum=0"))):
        run = Job(args, os.path.join(args.out, name), steps=6, extra=extra)
        results = finish(run.groups(2))
        expect(all(code == 0 for code, _ in results), f"{name} failed", [o for _, o in results])
        runs[name] = [losses(run.group_folder(g)) for g in range(2)]
    for g in range(2):
        expect(close(runs["diloco_lr1"][g], runs["local_sgd"][g], 1e-5),
               f"group {g}: DiLoCo of outer lr 1 without momentum {runs['diloco_lr1'][g]}, "
               f"LocalSGD {runs['local_sgd'][g]}")

    # Checkpoints after step 3, between the syncs of steps 2 and 4: the parameters differ from
    # the synced ones, and the momentum holds step 2's pseudo-gradient.
    checkpoints = ["--checkpoint.enable=true", "--checkpoint.interval=3"] + diloco_flags(2)
    whole = Job(args, os.path.join(args.out, "diloco_whole"), steps=6, extra=checkpoints)
    results = finish(whole.groups(2))
    expect(all(code == 0 for code, _ in results), "DiLoCo with checkpoints failed",
           [o for _, o in results])
    resumed = Job(args, os.path.join(args.out, "diloco_resumed"), steps=6, extra=checkpoints)
    for g in range(2):
        shutil.copytree(os.path.join(whole.group_folder(g), "checkpoint", "step-3"),
                        os.path.join(resumed.group_folder(g), "checkpoint", "step-3"))
    results = finish(resumed.groups(2))
    outputs = [o for _, o in results]
    expect(all(code == 0 for code, _ in results), "DiLoCo resumed from step 3 failed", outputs)
    for g in range(2):
        live, again = (losses(whole.group_folder(g), after=3),
                       losses(resumed.group_folder(g), after=3))
        expect(len(live) == 3 and again == live,
               f"group {g} resumed at step 3: {again}; uninterrupted: {live}", outputs)
    expect(len(final_weights([whole.group_folder(0), whole.group_folder(1),
                              resumed.group_folder(0), resumed.group_folder(1)])) == 1,
           "the resumed groups' final weights differ from the uninterrupted ones'", outputs)
    print(f"DiLoCo every step is Nesterov SGD: {got}; outer lr 1 is LocalSGD; resumed between "
          f"syncs exactly")


def diloco_rejoin(args):
    sync = diloco_flags(2)
    job = Job(args, os.path.join(args.out, "diloco_rejoin"), steps=8, extra=sync)
    back, outputs = job.kill_and_rejoin(2, "4:after_join", admit_at=6)  # killed in a sync
    live = [losses(job.group_folder(0)), losses(job.group_folder(1)), losses(back)]
    expect(len(live[0]) == 8 and len(live[2]) == 2 and live[0][7] == live[1][7] == live[2][1],
           f"the groups disagree at the last sync (step 8): {live}", outputs)
    expect(len(final_weights([job.group_folder(0), job.group_folder(1), back])) == 1,
           "after the last sync the groups' weights differ: the rejoined group's outer state "
           "is not the live one", outputs)
    print(f"rejoined after step 6 under DiLoCo; every group agrees after step 8's sync: {live}")


def etcd_lighthouse(args):
    """The quorum in a three-member etcd cluster, a member beside each group: a node lost (group
    1 and its member killed at step 3) leaves the others to go on, and group 1 started again (its
    node's member still gone) rejoins after step 6 through the members left; the losses and
    final weights are those of the same run kept in a store folder."""
    runs = {}
    for lighthouse in ("etcd", "folder"):
        etcd = EtcdCluster(3, os.path.join(args.out, "etcd")) if lighthouse == "etcd" else None
        try:
            job = Job(args, os.path.join(args.out, f"lighthouse_{lighthouse}"), steps=10,
                      etcd=etcd)
            back, outputs = job.kill_and_rejoin(
                1, "3:before_join", admit_at=6,
                while_down=None if etcd is None else lambda: etcd.kill(1))
        finally:
            if etcd is not None:
                etcd.stop()
        expect(lighthouse == "folder" or "etcd at " in outputs[0],
               "the groups did not keep their quorum in etcd", outputs)
        live = [losses(job.group_folder(0)), losses(job.group_folder(2)), losses(back)]
        expect(len(live[0]) == 10 and live[0] == live[1] and live[2] == live[0][6:],
               f"the groups disagree ({lighthouse}): {live}", outputs)
        expect(len(final_weights([job.group_folder(0), job.group_folder(2), back])) == 1,
               f"the groups' final weights differ ({lighthouse})", outputs)
        runs[lighthouse] = live[0]
        with open(os.path.join(job.group_folder(0), "model.arena"), "rb") as f:
            runs[lighthouse + "_weights"] = f.read()
    expect(runs["etcd"] == runs["folder"] and runs["etcd_weights"] == runs["folder_weights"],
           f"etcd's run {runs['etcd']} differs from the store folder's {runs['folder']}")
    print(f"a node lost (group 1 and its etcd member): the others went on, group 1 rejoined "
          f"after step 6; the same as with a store folder: {runs['etcd']}")


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
                                 "diloco", "diloco_rejoin", "etcd_lighthouse",
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
     "diloco": lambda: diloco(args),
     "diloco_rejoin": lambda: diloco_rejoin(args),
     "etcd_lighthouse": lambda: etcd_lighthouse(args),
     "min_replica_size": lambda: min_replica_size(args)}[args.case]()
    # Passed (a failure exits above): the groups' folders (checkpoints, up to 1 GB) go.
    shutil.rmtree(args.out)


if __name__ == "__main__":
    main()
