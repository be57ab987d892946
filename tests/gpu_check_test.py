#!/usr/bin/python3
"""tools/gpu-check with every CUDA device hidden: it must say "no CUDA device", exit 0 and
write a report marking every part "not run" (what a machine without a GPU gets)."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

with tempfile.TemporaryDirectory() as work:
    report = os.path.join(work, "report.json")
    done = subprocess.run([os.path.join(ROOT, "tools", "gpu-check"), "--report", report],
                          env=dict(os.environ, CUDA_VISIBLE_DEVICES=""), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=60)
    print(done.stdout)
    if done.returncode != 0:
        sys.exit(f"gpu-check exited {done.returncode}, expected 0")
    if "no CUDA device" not in done.stdout:
        sys.exit("gpu-check did not say \"no CUDA device\"")
    with open(report) as f:
        parts = json.load(f)["parts"]
    expected = {"build", "kernels", "nccl", "losses_cpu_vs_cuda", "resume", "layouts", "throughput"}
    if set(parts) != expected:
        sys.exit(f"report parts {sorted(parts)}, expected {sorted(expected)}")
    not_run = {name for name, part in parts.items() if part["status"] == "not run"}
    if not_run != expected:
        sys.exit(f"parts not marked \"not run\": {sorted(expected - not_run)}")
    print("every part marked \"not run\"")
