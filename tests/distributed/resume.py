#!/usr/bin/python3
"""Checkpoint resumption tests on the debug recipe (20 steps, a dcp checkpoint every 10).

    resume.py --titan-run BIN --recipe FILE --work DIR --mode MODE [--ranks N]
              [-- --section.key=value ...]

The overrides after "--" go to every run (the Float8 resume test turns the converter on).

exact     (--ranks N): a run resumed from the step-10 checkpoint of an uninterrupted run gives
          bit-identical losses for steps 11..20 and bit-identical final parameters; saves are
          asynchronous (checkpoint.async_mode = "async").
reshard   a checkpoint saved under fsdp 4 resumes on 2 ranks and on 1, with the same losses
          as the uninterrupted single-rank run (1e-5 relative).
reshard_tp  the same for a checkpoint saved under fsdp 2 x tp 2, resumed under tp 2, fsdp 2
          and on 1 rank.
reshard_pp  the same for a checkpoint saved under pp 2 (1F1B), resumed on one rank, under pp 4
          and under pp 2 with Interleaved1F1B (other stages on each rank).
reshard_cp  the same for a checkpoint saved under cp 2, resumed on one rank and under cp 4.
reshard_ep  the same for a mixture of experts' checkpoint saved under ep 2, resumed on one rank,
          under fsdp 2 without ep, under ep 4 (each rank other experts) and under ep 2 x tp 2
          (each rank half of each of its experts' matrices).
killed    a run killed while writing a checkpoint leaves the previous one loadable: the resumed
          run starts from it and ignores the interrupted step-<N>.tmp.
"""
import argparse
import filecmp
import json
import os
import shutil
import signal
import subprocess
import sys
import time

STEPS = 20
GUARD_S = 300  # only against a hang of this script; nothing is asserted about speed


def command(args, out, ranks, *extra, tp=1, pp=1, cp=1):
    # The ranks of a tp group (and of a pipeline) read the same batch: ranks / (tp x pp)
    # data-parallel ranks share the 4.
    run = [args.titan_run, "--recipe", args.recipe, f"--job.dump_folder={out}",
           f"--training.steps={STEPS}", "--generate.max_new_tokens=0", "--validation.freq=5",
           "--validation.steps=1", "--training.global_batch_size=4",
           f"--training.local_batch_size={4 * tp * pp * cp // ranks}",
           f"--parallelism.context_parallel_degree={cp}",
           f"--parallelism.tensor_parallel_degree={tp}",
           f"--parallelism.pipeline_parallel_degree={pp}", "--checkpoint.enable=true",
           "--checkpoint.interval=10", "--checkpoint.last_save_model_only=false",
           *args.overrides, *extra]
    if ranks > 1:
        run = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(ranks)] + run
    return run


def train(args, out, ranks, *extra, fresh=True, tp=1, pp=1, cp=1):
    if fresh:
        shutil.rmtree(out, ignore_errors=True)
    run = command(args, out, ranks, *extra, tp=tp, pp=pp, cp=cp)
    print(" ".join(run), flush=True)
    done = subprocess.run(run, env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        print(done.stdout)
        sys.exit(f"the run failed with exit status {done.returncode}")
    return done.stdout


def losses(out):
    """Step -> (loss, eval loss) for steps 11..20, as logged (text, so equality is exact)."""
    result = {}
    with open(os.path.join(out, "metrics.jsonl")) as f:
        for line in f:
            record = json.loads(line)
            if record["step"] > 10:
                key = "loss" if "loss" in record else "eval_loss"
                result[(record["step"], key)] = record[key]
    return result


def resume_from(source, out):
    """A fresh dump folder holding only `source`'s step-10 checkpoint."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "checkpoint"))
    shutil.copytree(os.path.join(source, "checkpoint", "step-10"),
                    os.path.join(out, "checkpoint", "step-10"))


def compare(got, want, tolerance, label):
    if sorted(got) != sorted(want):
        sys.exit(f"{label}: logged {sorted(got)}, expected {sorted(want)}")
    worst = 0.0
    for key in sorted(want):
        rel = abs(got[key] - want[key]) / abs(want[key])
        worst = max(worst, rel)
        if rel > tolerance:
            sys.exit(f"{label}: step {key[0]} {key[1]} {got[key]} vs {want[key]} (rel {rel:.1e})")
    print(f"{label}: {len(want)} losses, worst relative difference {worst:.1e}")


def exact(args):
    straight, resumed = os.path.join(args.work, "straight"), os.path.join(args.work, "resumed")
    train(args, straight, args.ranks, "--checkpoint.async_mode=async")
    resume_from(straight, resumed)
    log = train(args, resumed, args.ranks, "--checkpoint.async_mode=async", fresh=False)
    if "loaded" not in log or "step-10 (step 10)" not in log:
        sys.exit("the resumed run did not report loading step 10")
    compare(losses(resumed), losses(straight), 0.0, "resumed vs straight")
    if not filecmp.cmp(os.path.join(straight, "model.arena"), os.path.join(resumed, "model.arena"),
                       shallow=False):
        sys.exit("the final parameters differ")
    print("final parameters bit-identical")


def resumes_like_one_rank(args, saved_name, saved, resumed):
    """Trains the single-rank run and the layout `saved` (ranks, options), then resumes the
    latter's step-10 checkpoint under each of `resumed` (name, ranks, options): steps 11..20
    must match the single-rank run's losses to 1e-5."""
    single = os.path.join(args.work, "single")
    train(args, single, 1)
    source = os.path.join(args.work, saved_name)
    ranks, options = saved
    train(args, source, ranks, **options)
    for name, ranks, options in resumed:
        out = os.path.join(args.work, f"resumed_{name}")
        resume_from(source, out)
        extra = options.pop("extra", ())
        train(args, out, ranks, *extra, fresh=False, **options)
        compare(losses(out), losses(single), 1e-5, f"{saved_name} -> {name}")


def reshard(args):
    resumes_like_one_rank(args, "fsdp4", (4, {}),
                          [("on_2", 2, {}), ("on_1", 1, {})])


def reshard_tp(args):
    resumes_like_one_rank(args, "fsdp2_tp2", (4, {"tp": 2}),
                          [("tp2", 2, {"tp": 2}), ("fsdp2", 2, {}), ("one_rank", 1, {})])


def reshard_pp(args):
    interleaved = ("--parallelism.pipeline_parallel_schedule=Interleaved1F1B",)
    resumes_like_one_rank(args, "pp2", (2, {"pp": 2}),
                          [("one_rank", 1, {}), ("pp4", 4, {"pp": 4}),
                           ("pp2_interleaved", 2, {"pp": 2, "extra": interleaved})])


def reshard_cp(args):
    resumes_like_one_rank(args, "cp2", (2, {"cp": 2}),
                          [("one_rank", 1, {}), ("cp4", 4, {"cp": 4})])


def reshard_ep(args):
    def ep(n):
        return (f"--parallelism.expert_parallel_degree={n}",)
    single = os.path.join(args.work, "single")
    train(args, single, 1)
    source = os.path.join(args.work, "ep2")
    train(args, source, 2, *ep(2))
    for name, ranks, extra, tp in [("one_rank", 1, (), 1), ("fsdp2", 2, (), 1),
                                   ("ep4", 4, ep(4), 1), ("ep2_tp2", 4, ep(2), 2)]:
        out = os.path.join(args.work, f"resumed_{name}")
        resume_from(source, out)
        train(args, out, ranks, *extra, fresh=False, tp=tp)
        compare(losses(out), losses(single), 1e-5, f"ep2 -> {name}")


def killed(args):
    out = os.path.join(args.work, "killed")
    for attempt in range(5):
        shutil.rmtree(out, ignore_errors=True)
        # A save every step; the run is killed as soon as one is seen in progress.
        run = command(args, out, 1, "--checkpoint.interval=1", "--checkpoint.keep_latest_k=0")
        job = subprocess.Popen(run, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        root, deadline, caught = os.path.join(out, "checkpoint"), time.monotonic() + GUARD_S, None
        while job.poll() is None and time.monotonic() < deadline and caught is None:
            names = os.listdir(root) if os.path.isdir(root) else []
            partial = [n for n in names if n.endswith(".tmp") and n != "step-1.tmp"]
            if partial:
                job.send_signal(signal.SIGKILL)
                caught = partial[0]
            time.sleep(0.002)
        job.kill()
        job.wait()
        if caught and os.path.isdir(os.path.join(root, caught)):
            break
        print(f"attempt {attempt + 1}: the kill missed the save window; again")
    else:
        sys.exit("could not kill the run during a save in 5 attempts")
    interrupted = int(caught[len("step-"):-len(".tmp")])
    complete = sorted(int(n[5:]) for n in os.listdir(root)
                      if n.startswith("step-") and not n.endswith(".tmp"))
    print(f"killed while writing step {interrupted}; complete checkpoints: {complete}")
    if not complete or complete[-1] >= interrupted:
        sys.exit("expected complete checkpoints only before the interrupted step")
    log = train(args, out, 1, f"--training.steps={complete[-1] + 1}", fresh=False)
    if f"loaded {os.path.join(root, f'step-{complete[-1]}')} (step {complete[-1]})" not in log:
        print(log)
        sys.exit(f"the run did not resume from step {complete[-1]}")
    print(f"resumed from step {complete[-1]}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--titan-run", required=True)
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--mode", choices=["exact", "reshard", "reshard_tp", "reshard_pp", "reshard_cp", "reshard_ep",
                                 "killed"], required=True)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("overrides", nargs="*",
                        help="titan-run overrides for every run, after --, e.g. -- --job.device=cuda")
    args = parser.parse_args()
    {"exact": exact, "reshard": reshard, "reshard_tp": reshard_tp, "reshard_pp": reshard_pp,
     "reshard_cp": reshard_cp, "reshard_ep": reshard_ep, "killed": killed}[args.mode](args)
    # Passed: the checkpoints and models (hundreds of MB) go; a failed run keeps them to look at.
    shutil.rmtree(args.work)


if __name__ == "__main__":
    main()
