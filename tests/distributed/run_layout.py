#!/usr/bin/python3
"""Trains a recipe under one parallel layout and, given a baseline, checks its losses.

    run_layout.py --titan-run BIN --recipe FILE --out DIR --ranks N [--baseline DIR]
                  [--tolerance 1e-5] [--must-differ] [--state-fraction F] [--log-contains TEXT]
                  [--loss-falls FRACTION] [-- --section.key=value ...]

Runs `mpirun -np N titan-run` (plain titan-run for N = 1) with the overrides, writing
DIR/metrics.jsonl and DIR/output.log (a run that passes removes its saved model.arena: the suite
would otherwise leave gigabytes behind). With --baseline, every step's training loss and every
validation loss (and a mixture of experts' auxiliary loss, where logged) must be within the relative tolerance of the baseline run's; the comparison is
printed as a table. With --must-differ, some loss must also differ from the baseline's (a run
in another precision that matched it exactly would not have used that precision). With --state-fraction, every rank's parameters, gradients and optimizer state
must take that fraction of the baseline's (1/N under fsdp over N ranks), to within 1%.
--log-contains (repeatable): the run's output must contain TEXT. With --loss-falls, the mean
training loss of the last five steps must be below the first step's by at least FRACTION of it
(the run trains).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys


def losses(folder):
    path = os.path.join(folder, "metrics.jsonl")
    train, evals, aux = {}, {}, {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            if "loss" in record:
                train[record["step"]] = record["loss"]
            if "eval_loss" in record:
                evals[record["step"]] = record["eval_loss"]
            if "moe_aux_loss" in record:
                aux[record["step"]] = record["moe_aux_loss"]
    return train, evals, aux


def state_mib(log):
    """Each rank's "[memory] parameters, gradients and optimizer state: X MiB" figure."""
    return [float(x) for x in
            re.findall(r"parameters, gradients and optimizer state: ([0-9.]+) MiB", log)]


def check_loss_falls(train, fraction):
    steps = sorted(train)
    if len(steps) < 6:
        sys.exit(f"--loss-falls needs at least 6 logged steps, found {len(steps)}")
    first, last = train[steps[0]], sum(train[s] for s in steps[-5:]) / 5
    print(f"training loss {first:.4f} at step {steps[0]}, {last:.4f} on average over steps "
          f"{steps[-5]}-{steps[-1]}: {1 - last / first:.1%} lower (at least {fraction:.1%} asked)")
    if last > first * (1 - fraction):
        sys.exit("the training loss did not fall as much as asked")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--titan-run", required=True)
    parser.add_argument("--recipe", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--baseline")
    parser.add_argument("--tolerance", type=float, default=1e-5)
    parser.add_argument("--must-differ", action="store_true")
    parser.add_argument("--state-fraction", type=float)
    parser.add_argument("--log-contains", action="append", default=[])
    parser.add_argument("--loss-falls", type=float)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()

    shutil.rmtree(args.out, ignore_errors=True)
    command = [args.titan_run, "--recipe", args.recipe, f"--job.dump_folder={args.out}"]
    command += args.overrides
    if args.ranks > 1:
        command = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(args.ranks)] + command
    # One thread per rank: the ranks share this machine's cores.
    env = dict(os.environ, OMP_NUM_THREADS="1")
    print(" ".join(command), flush=True)
    run = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    with open(os.path.join(args.out, "output.log"), "w") as f:
        f.write(run.stdout)
    if run.returncode != 0:
        print(run.stdout)
        sys.exit(f"the run failed with exit status {run.returncode}")
    for text in args.log_contains:
        if text not in run.stdout:
            sys.exit(f"the run's output does not say {text!r}")
        print(f"the output says {text!r}")
    if args.loss_falls is not None:
        check_loss_falls(losses(args.out)[0], args.loss_falls)
    if args.baseline:
        compare_with_baseline(args, run.stdout)
    # Passed: the saved model (24 MB and more) goes, the losses and the log stay for the runs that
    # compare against this one. A failed run keeps everything to look at.
    model = os.path.join(args.out, "model.arena")
    if os.path.exists(model):
        os.remove(model)


def compare_with_baseline(args, output):

    if args.state_fraction is not None:
        with open(os.path.join(args.baseline, "output.log")) as f:
            (base,) = state_mib(f.read())
        ranks = state_mib(output)
        if len(ranks) != args.ranks:
            sys.exit(f"expected a memory line from each of {args.ranks} ranks, found {ranks}")
        for mib in ranks:
            print(f"state {mib:.1f} MiB per rank vs {base:.1f} MiB on one rank "
                  f"(expected x{args.state_fraction:.3f})")
            if abs(mib - base * args.state_fraction) > 0.01 * base * args.state_fraction:
                sys.exit("per-rank state does not match the expected fraction")

    train, evals, aux = losses(args.out)
    base_train, base_evals, base_aux = losses(args.baseline)
    failures = 0
    for kind, got, want in (("train", train, base_train), ("eval", evals, base_evals),
                            ("aux", aux, base_aux)):
        if sorted(got) != sorted(want):
            sys.exit(f"{kind} losses logged at steps {sorted(got)}, the baseline at {sorted(want)}")
        for step in sorted(want):
            rel = abs(got[step] - want[step]) / abs(want[step])
            ok = rel <= args.tolerance
            failures += not ok
            print(f"{kind} step {step:3d}: {got[step]:.6f} vs baseline {want[step]:.6f}  "
                  f"rel {rel:.1e} {'ok' if ok else 'EXCEEDS ' + str(args.tolerance)}")
    if not train:
        sys.exit("no training losses were logged")
    if args.must_differ and train == base_train and evals == base_evals:
        sys.exit("every loss equals the baseline's: the run did not change precision")
    if failures:
        sys.exit(f"{failures} loss(es) differ from the single-rank run by more than "
                 f"{args.tolerance} relative")


if __name__ == "__main__":
    main()
