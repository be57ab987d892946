#!/usr/bin/python3
"""TensorBoard's own reader returns exactly the values of metrics.jsonl.

  tensorboard_test.py TITAN_RUN RECIPE OUT [MPIEXEC]

Trains the debug model a few steps with metrics.enable_tensorboard, then reads the event files
with the `tensorboard` package from PyPI, installed into a virtual environment outside the clone
(TITAN_TENSORBOARD_VENV, default /var/cache/titan/tensorboard-venv-<version>) when missing. With
MPIEXEC it also runs two ranks with metrics.save_for_all_ranks and reads each rank's folder.
"""
import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys

TENSORBOARD = "2.21.0"
VENV = os.environ.get("TITAN_TENSORBOARD_VENV", f"/var/cache/titan/tensorboard-venv-{TENSORBOARD}")

# Runs inside the venv: every scalar of every event file under a folder, as JSON.
READER = r"""
import json, sys
from tensorboard.backend.event_processing import plugin_event_accumulator as pea
from tensorboard.util import tensor_util
acc = pea.EventAccumulator(sys.argv[1], size_guidance={pea.TENSORS: 0})
acc.Reload()
out = {}
for tag in acc.Tags()["tensors"]:
    out[tag] = [[e.step, tensor_util.make_ndarray(e.tensor_proto).item()] for e in acc.Tensors(tag)]
print(json.dumps(out))
"""


def ensure_venv():
    python = os.path.join(VENV, "bin", "python")
    os.makedirs(os.path.dirname(VENV), exist_ok=True)
    with open(VENV + ".lock", "w") as lock:  # two tests creating it at once wait for each other
        fcntl.flock(lock, fcntl.LOCK_EX)
        ok = os.path.exists(python) and subprocess.run(
            [python, "-c", "import tensorboard"], capture_output=True).returncode == 0
        if not ok:
            shutil.rmtree(VENV, ignore_errors=True)
            subprocess.run(["/usr/bin/python3", "-m", "venv", VENV], check=True)
            subprocess.run([os.path.join(VENV, "bin", "pip"), "install", "--quiet",
                            f"tensorboard=={TENSORBOARD}"], check=True)
    return python


def read_tensorboard(python, folder):
    result = subprocess.run([python, "-c", READER, folder], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def jsonl_scalars(path):
    scalars = {}
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            for key, value in row.items():
                if key != "step" and value is not None:
                    scalars.setdefault(key, []).append([row["step"], value])
    return scalars


def train(command, out, *overrides):
    shutil.rmtree(out, ignore_errors=True)
    result = subprocess.run(command + [
        "--training.steps=4", "--metrics.log_freq=1", "--validation.freq=2",
        "--validation.steps=1", "--generate.max_new_tokens=0", "--metrics.enable_tensorboard=true",
        f"--job.dump_folder={out}", *overrides], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def main():
    titan_run, recipe, out = sys.argv[1:4]
    mpiexec = sys.argv[4] if len(sys.argv) > 4 else None
    python = ensure_venv()

    single = os.path.join(out, "single")
    train([titan_run, "--recipe", recipe], single)
    expected = jsonl_scalars(os.path.join(single, "metrics.jsonl"))
    runs = glob.glob(os.path.join(single, "tb", "*"))
    assert len(runs) == 1, f"expected one run folder under tb/, found {runs}"
    found = read_tensorboard(python, runs[0])
    assert {"loss", "grad_norm", "lr", "tps", "tflops", "mem_gib", "data_s",
            "eval_loss"} <= set(expected), expected.keys()
    assert found == expected, f"TensorBoard read {found}\nmetrics.jsonl holds {expected}"
    print(f"single rank: {sum(len(v) for v in found.values())} scalars equal metrics.jsonl's")

    if mpiexec:
        ranks = os.path.join(out, "ranks")
        train([mpiexec, "--oversubscribe", "--allow-run-as-root", "-np", "2", titan_run,
               "--recipe", recipe], ranks, "--metrics.save_for_all_ranks=true",
              "--metrics.save_tb_folder=board")
        expected = jsonl_scalars(os.path.join(ranks, "metrics.jsonl"))
        for rank in (0, 1):
            folders = glob.glob(os.path.join(ranks, "board", "*", f"rank_{rank}"))
            assert len(folders) == 1, f"rank {rank}: expected one folder, found {folders}"
            found = read_tensorboard(python, folders[0])
            # The global values agree on every rank; rank 0's also equal metrics.jsonl exactly.
            for key in ("loss", "grad_norm", "lr", "eval_loss"):
                assert found[key] == expected[key], f"rank {rank} {key}: {found[key]} vs {expected[key]}"
            assert [s for s, _ in found["tps"]] == [s for s, _ in expected["tps"]]
            if rank == 0:
                assert found == expected, f"rank 0 read {found}\nmetrics.jsonl holds {expected}"
        print("two ranks: each wrote its own TensorBoard folder")
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
