#!/usr/bin/env python3
"""--validate refuses what the run refuses, over the whole recipe schema (issue #39).

For every key of `titan-run --recipe-reference` (the core's and every plugin's, each plugin's keys
with the plugin selected), a few values chosen from the key's type (bounds, each allowed choice, a
bogus one) are tried on a tiny debug run, each twice: `titan-run --validate` and the run itself,
under mpirun when the recipe asks for more ranks. The run is stopped once its first step is logged;
what it refuses, it refuses before its step loop starts (a failure after that, such as a loss
that overflows, is no refusal). Expected of every case:
  - the run refuses (exits before its first step) exactly when --validate refuses;
  - with the same exit status, and --validate's first error is the run's (the run prefixes it
    with the recipe's path).
A run that crashes (a signal, or no error line) fails the test too.

  validate_schema_test.py TITAN_RUN RECIPE [KEY_REGEX]
"""
import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading

MAX_RANKS = 4  # more is refused by the machine, not the recipe: such cases are left out
GUARD_S = 300


def candidate_values(kind):
    """The values tried for a key of the reference's type column."""
    if kind.startswith("integer"):
        return ["0", "-1", "3", "1000000000000"]
    if kind.startswith("float"):
        return ["-1", "1e30", "nan"]
    if kind.startswith("boolean"):
        return ["true", "false"]
    if kind.startswith("string:"):
        return [v.strip() for v in kind.split(":", 1)[1].split(",")] + ["bogus", ""]
    if kind.startswith("string"):
        return ["", "bogus"]
    if kind.startswith("array"):
        choices = kind.split(":", 1)[1].split(",") if ":" in kind else []
        return ["[]", '["bogus"]'] + ['["%s"]' % c.strip() for c in choices]
    raise ValueError("a key of unknown type: " + kind)


def schema_cases(titan_run):
    """(override, selector overrides) for every key and candidate value of the reference."""
    reference = subprocess.run([titan_run, "--recipe-reference"], capture_output=True, text=True,
                               check=True).stdout
    cases, section, selector = [], None, []
    for line in reference.splitlines():
        if m := re.match(r"#### \[(\w+)\]", line):
            section, selector = m.group(1), []
        elif m := re.match(r'With `(\w+) = "([^"]+)"`', line):
            selector = ["--%s.%s=%s" % (section, m.group(1), m.group(2))]
        elif (m := re.match(r"\| `(\w+)` \| ([^|]+) \|", line)) and section:
            key, kind = m.group(1), m.group(2).strip()
            if (section, key) == ("model", "flavor"):
                # The debug flavors, and one refused for memory on any machine.
                values = ["debugmodel_gqa", "debugmodel_tied", "405B", "bogus"]
            else:
                values = candidate_values(kind)
            for value in values:
                cases.append(("--%s.%s=%s" % (section, key, value), selector))
    return cases


def first_error(output):
    for line in output.splitlines():
        if "[error]" in line:
            return re.sub(r"^.*?\[error\] \[rank \d+ step [^]]*\] ", "", line)
    return None


def run_until_first_step(command, env, cwd):
    """(exit status, None when stopped at its first step; whether its step loop started; output)"""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               env=env, cwd=cwd, start_new_session=True)
    # Only a guard against a hang, which the case then reports; nothing is asserted about speed.
    guard = threading.Timer(GUARD_S, lambda: os.killpg(process.pid, signal.SIGKILL))
    guard.start()
    lines, started = [], False
    try:
        for raw in process.stdout:
            lines.append(raw.decode("utf-8", "replace"))
            started = started or re.search(r"\[train\] \d+ steps of", lines[-1]) is not None
            if re.search(r"step 1\] loss", lines[-1]):
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return None, True, "".join(lines)
        return process.wait(), started, "".join(lines)
    finally:
        guard.cancel()


def check_case(titan_run, base, work, index, case):
    override, selector = case
    dump = os.path.join(work, "run-%d" % index)
    args = base + selector + ["--job.dump_folder=" + dump, override]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    validate = subprocess.run([titan_run] + args + ["--validate"], capture_output=True, env=env,
                              cwd=work)
    validate_out = (validate.stdout + validate.stderr).decode("utf-8", "replace")
    ranks = re.search(r"(?:valid|checking the recipe) for (\d+) rank", validate_out)
    ranks = int(ranks.group(1)) if ranks else 1
    if ranks > MAX_RANKS:
        return None
    command = [titan_run] + args
    if ranks > 1:
        command = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-np", str(ranks)] + command
    status, started, run_out = run_until_first_step(command, env, work)
    shutil.rmtree(dump, ignore_errors=True)
    name = " ".join(selector + [override])
    # A failure once the step loop has started (a loss that overflows) is no refusal.
    refused, validated = status not in (None, 0) and not started, validate.returncode != 0
    if status is not None and status < 0:
        return "%s: the run died of signal %d\n%s" % (name, -status, run_out[-2000:])
    if refused != validated:
        return "%s: --validate %s, the run %s\n  validate: %s\n  run: %s" % (
            name, "refused" if validated else "passed", "refused" if refused else "passed",
            first_error(validate_out), first_error(run_out))
    if not refused:
        return None
    if status != validate.returncode:
        return "%s: --validate exits %d, the run %d\n  validate: %s\n  run: %s" % (
            name, validate.returncode, status, first_error(validate_out), first_error(run_out))
    ours, theirs = first_error(validate_out), first_error(run_out)
    if ours is None or theirs is None or not theirs.endswith(ours):
        return "%s: another reason\n  validate: %s\n  run: %s" % (name, ours, theirs)
    return None


def main():
    titan_run, recipe = os.path.abspath(sys.argv[1]), sys.argv[2]
    keys = re.compile(sys.argv[3] if len(sys.argv) > 3 else ".")
    work = tempfile.mkdtemp(prefix="titan-validate-schema-")
    corpus = os.path.join(work, "corpus.txt")
    with open(corpus, "w") as out:  # 40 windows of 33 bytes and more, in 40 documents
        for i in range(40):
            out.write("Document %d is about the number %d and its friends.\n%%\n" % (i, i * i))
    base = ["--recipe", os.path.abspath(recipe), "--training.steps=1",
            "--generate.max_new_tokens=0", "--training.dataset_path=" + corpus,
            "--model.tokenizer_path=byte", "--training.seq_len=32",
            "--training.local_batch_size=2"]
    cases = [c for c in schema_cases(titan_run) if keys.search(c[0])]
    failures, checked = [], 0
    with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        for failure in pool.map(lambda ic: check_case(titan_run, base, work, *ic),
                                enumerate(cases)):
            checked += 1
            if failure:
                failures.append(failure)
    shutil.rmtree(work, ignore_errors=True)
    print("%d cases over %d keys" % (checked, len({c[0].split("=")[0] for c in cases})))
    for failure in failures:
        print("FAIL " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
