#!/usr/bin/python3
"""bench/torch-venv, and bench/train_throughput.py's and bench/moe_step.py's --pypi-torch, refuse
bad arguments with the exit code and message their usage promises, without downloading or
measuring anything (CI has no PyPI venv).

Usage: bench_args_test.py SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

SOURCE = sys.argv[1]
TORCH_VENV = os.path.join(SOURCE, "bench", "torch-venv")
THROUGHPUT = os.path.join(SOURCE, "bench", "train_throughput.py")
MOE_STEP = os.path.join(SOURCE, "bench", "moe_step.py")


def run(*command):
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout, done.stderr


checks = 0


def expect(command, code, message, stream="stderr"):
    global checks
    checks += 1
    rc, out, err = run(*command)
    text = out if stream == "stdout" else err
    assert rc == code and message in text, (
        f"{' '.join(command)}: expected exit {code} and {message!r} on {stream}, found exit {rc}"
        f"\nstdout: {out}\nstderr: {err}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        absent = os.path.join(tmp, "absent-venv")
        expect([TORCH_VENV, "--help"], 0, "Usage: bench/torch-venv", "stdout")
        expect([TORCH_VENV, "--bogus"], 2, "unknown argument '--bogus'")
        expect([TORCH_VENV, "--dir"], 2, "--dir needs a folder")
        # --check installs nothing: it reports the missing venv and leaves no folder behind.
        expect([TORCH_VENV, "--check", "--dir", absent], 1,
               f"no torch 2.15.0 with transformers 5.25.0 in {absent}")
        assert not os.path.exists(absent), f"torch-venv --check created {absent}"
        # A folder that is not a venv is never deleted to make room for one.
        precious = os.path.join(tmp, "precious")
        os.mkdir(precious)
        with open(os.path.join(precious, "data.txt"), "w") as f:
            f.write("keep")
        expect([TORCH_VENV, "--dir", precious], 1, "is not a virtual environment")
        assert os.path.exists(os.path.join(precious, "data.txt")), "torch-venv deleted a folder"

        # train_throughput.py checks --pypi-torch before it measures anything (/bin/true stands
        # in for titan_train_bench, which is never run).
        expect(["/usr/bin/python3", THROUGHPUT, "/bin/true", "--pypi-torch", absent], 1,
               f"--pypi-torch {absent} is not an executable")
        # Debian's torch 1.13 has no torch.compile: refused as the PyPI peer.
        expect(["/usr/bin/python3", THROUGHPUT, "/bin/true", "--pypi-torch", "/usr/bin/python3"],
               1, "expected 2.0 or later (torch.compile)")
        expect(["/usr/bin/python3", MOE_STEP, "/bin/true", "--pypi-torch", absent], 1,
               f"moe_step: --pypi-torch {absent} is not an executable")
        expect(["/usr/bin/python3", MOE_STEP, "/bin/true", "--pypi-torch", "/usr/bin/python3"],
               1, "expected 2.0 or later (torch.compile)")
        expect(["/usr/bin/python3", MOE_STEP, "/bin/true", "--configs", "huge"], 1,
               "unknown config 'huge'; known: debugmodel, tiny")
    print(f"{checks} passed, 0 failed")


if __name__ == "__main__":
    main()
