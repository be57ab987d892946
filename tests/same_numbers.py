#!/usr/bin/python3
"""Checks that a change moved no number: the training runs of the test suite, bit for bit.

    same_numbers.py --baseline REF [--build DIR] [--work DIR] [-R REGEX] [-j N] [--list]

Builds titan-run and its plugins from the commit REF (a git worktree and build folder under
--work, default build-same-numbers/, kept between calls so a second call rebuilds nothing), then
runs every test of the current build (--build, default build/) that trains through
tests/distributed/run_layout.py -- the single-rank precision and Float8 runs over 100 steps and
every parallel layout the suite runs -- once with REF's titan-run and once with the current one,
same recipe, same overrides, same ranks. Each pair must agree exactly: every training loss,
gradient norm and validation loss as metrics.jsonl prints them, and the saved model.arena byte
for byte where the runs save one. -R keeps the tests whose name matches REGEX. Prints a table; exits 1 on a difference or
a failed run, 2 on bad usage.

Refactorings that must not move numbers (issue #33's redesign) are checked this way against the
commit before them.
"""
import argparse
import concurrent.futures
import filecmp
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN_LAYOUT = os.path.join(ROOT, "tests", "distributed", "run_layout.py")
# run_layout.py's flags that compare against another run, which this script does itself.
COMPARING_FLAGS = {"--baseline": 1, "--tolerance": 1, "--state-fraction": 1, "--must-differ": 0,
                   "--log-contains": 1}
COMPARED_KEYS = ("loss", "grad_norm", "eval_loss")


def sh(command, **kwargs):
    print("+ " + " ".join(command), flush=True)
    subprocess.run(command, check=True, **kwargs)


def build_baseline(ref, work):
    """REF's titan-run and plugins in work/build; returns the titan-run path."""
    source = os.path.join(work, "source")
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--verify", ref + "^{commit}"],
                            check=True, capture_output=True, text=True).stdout.strip()
    if not os.path.isdir(source):
        sh(["git", "-C", ROOT, "worktree", "add", "--detach", source, commit])
    else:
        sh(["git", "-C", source, "checkout", "--quiet", "--detach", commit])
    build = os.path.join(work, "build")
    env = dict(os.environ, CCACHE_BASEDIR=source, CCACHE_NOHASHDIR="true")
    if not os.path.isfile(os.path.join(build, "build.ninja")):
        # tools/dev's flags, so that ccache serves every file the change did not touch.
        sh(["cmake", "-S", source, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
            "-DTITAN_WARNINGS_AS_ERRORS=ON", "-DTITAN_BUILD_TESTS=OFF",
            "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"], env=env,
           stdout=subprocess.DEVNULL)
    sh(["cmake", "--build", build, "-j", str(os.cpu_count()), "--target", "titan-run",
        "titan_plugins"], env=env)
    return os.path.join(build, "bin", "titan-run"), commit


def training_tests(build):
    """(name, run_layout arguments without the comparing flags, overrides, environment)."""
    listing = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, check=True,
                             capture_output=True, text=True).stdout
    tests = []
    for test in json.loads(listing)["tests"]:
        command = test.get("command") or []
        scripts = [i for i, word in enumerate(command) if word.endswith("run_layout.py")]
        if not scripts:
            continue
        args, overrides = split_arguments(command[scripts[0] + 1:])
        properties = {p["name"]: p["value"] for p in test.get("properties", [])}
        environment = dict(item.split("=", 1) for item in properties.get("ENVIRONMENT", []))
        tests.append((test["name"], args, overrides, environment))
    return tests


def split_arguments(arguments):
    """run_layout.py's own flags (minus the comparing ones) as a dict, and the overrides."""
    args, i = {}, 0
    while i < len(arguments) and arguments[i] != "--":
        flag = arguments[i]
        if flag in COMPARING_FLAGS:
            i += 1 + COMPARING_FLAGS[flag]
            continue
        args[flag] = arguments[i + 1]
        i += 2
    return args, arguments[i + 1:]


def run(titan_run, args, overrides, environment, out):
    command = [RUN_LAYOUT, "--titan-run", titan_run, "--recipe", args["--recipe"], "--out", out,
               "--ranks", args.get("--ranks", "1"), "--"] + overrides
    result = subprocess.run(command, env=dict(os.environ, **environment), cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if result.returncode != 0:
        return f"the run failed ({result.returncode}); see {out}/output.log"
    return None


def printed_numbers(folder):
    """Every compared key of every metrics.jsonl row, as the text the run printed."""
    numbers = []
    with open(os.path.join(folder, "metrics.jsonl")) as f:
        for line in f:
            for key in COMPARED_KEYS:
                match = re.search(r'"%s": ([^,}]+)' % key, line)
                if match:
                    step = json.loads(line)["step"]
                    numbers.append((step, key, match.group(1)))
    return numbers


def compare(before, after):
    """None when the two runs agree exactly, else what differs first."""
    old, new = printed_numbers(before), printed_numbers(after)
    if len(old) != len(new):
        return f"{len(old)} logged numbers before, {len(new)} after"
    for (step, key, a), (_, _, b) in zip(old, new):
        if a != b:
            return f"step {step} {key}: {a} before, {b} after"
    saved = [os.path.exists(os.path.join(folder, "model.arena")) for folder in (before, after)]
    if saved[0] != saved[1]:
        return "model.arena saved by one run only"
    if saved[0] and not filecmp.cmp(os.path.join(before, "model.arena"),
                                    os.path.join(after, "model.arena"), shallow=False):
        return "model.arena differs"
    return None


def check(test, baseline_run, current_run, runs):
    name, args, overrides, environment = test
    before, after = os.path.join(runs, name, "baseline"), os.path.join(runs, name, "current")
    failure = (run(baseline_run, args, overrides, environment, before) or
               run(current_run, args, overrides, environment, after))
    return name, failure or compare(before, after)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", required=True, help="the commit to compare against")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--work", default=os.path.join(ROOT, "build-same-numbers"))
    parser.add_argument("-R", dest="regex", default="")
    parser.add_argument("-j", dest="jobs", type=int, default=1)
    parser.add_argument("--list", action="store_true", help="list the tests and stop")
    args = parser.parse_args()
    current_run = os.path.join(os.path.abspath(args.build), "bin", "titan-run")
    if not os.access(current_run, os.X_OK):
        parser.error(f"no titan-run in {args.build}/bin: build the current tree first")

    tests = [t for t in training_tests(args.build) if re.search(args.regex, t[0])]
    if not tests:
        parser.error(f"no training test matches -R {args.regex!r}")
    if args.list:
        print("\n".join(t[0] for t in tests))
        return 0
    baseline_run, commit = build_baseline(args.baseline, os.path.abspath(args.work))
    runs = os.path.join(os.path.abspath(args.work), "runs")
    print(f"{len(tests)} training runs, each with {commit[:12]}'s titan-run and the current one",
          flush=True)
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(check, t, baseline_run, current_run, runs) for t in tests]
        for done, future in enumerate(concurrent.futures.as_completed(futures), 1):
            name, problem = future.result()
            failed += problem is not None
            verdict = "same" if problem is None else "DIFFERENT: " + problem
            print(f"[{done}/{len(tests)}] {name:55s} {verdict}", flush=True)
    print(f"{len(tests) - failed} of {len(tests)} runs bit-identical to {commit[:12]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
