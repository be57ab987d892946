#!/usr/bin/python3
"""titan-plot draws two runs on one chart, as a PNG of the asked size and an SVG."""
import os
import subprocess
import sys
import tempfile

import matplotlib.image
import numpy as np

TITAN_PLOT = sys.argv[1]
ROW = ('{{"step": {step}, "loss": {loss}, "grad_norm": 1.0, "lr": 0.0001, "tps": 100.0, '
       '"tflops": 0.1, "mfu": {mfu}, "mem_gib": 0.25, "data_s": 0.01}}\n')


def write_run(folder, losses):
    os.makedirs(folder)
    with open(os.path.join(folder, "metrics.jsonl"), "w") as f:
        for step, loss in enumerate(losses, 1):
            f.write(ROW.format(step=step, loss=loss, mfu="null" if step == 2 else 1.5))
        f.write('{"step": 3, "eval_loss": 9.0}\n')
        f.write('{"step": 4, "lo')  # a row cut short by a kill: skipped


def has_color(image, hex_color):
    rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)]) / 255.0
    return bool(np.any(np.all(np.abs(image[:, :, :3] - rgb) < 0.02, axis=2)))


def plot(*args, **kwargs):
    return subprocess.run([TITAN_PLOT, *args], capture_output=True, text=True,
                          errors="backslashreplace", timeout=60, **kwargs)


def check_bad_inputs(tmp):
    """Damaged or hostile inputs end in a message and exit 2, never a traceback or a hang."""
    garbage = os.path.join(tmp, "garbage.jsonl")
    with open(garbage, "wb") as f:
        f.write(bytes(range(256)) * 8 + b"\n\xff\xfe\x1b[31m\n")
    result = plot("--out", os.path.join(tmp, "g"), garbage)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "not JSON rows, skipped" in result.stderr and "no metrics rows" in result.stderr
    assert "\x1b" not in result.stderr, "raw bytes of the file reached the terminal"

    result = plot("--out", os.path.join(tmp, "huge"), "--size", "100000x100000",
                  os.path.join(tmp, "baseline"))
    assert result.returncode == 2 and "--size: expected 100 to 10000" in result.stderr, result.stderr

    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)  # nobody writes to it: reading it would block forever
    result = plot("--out", os.path.join(tmp, "f"), fifo)
    assert result.returncode == 2 and "not a regular file" in result.stderr, result.stderr

    strings = os.path.join(tmp, "strings.jsonl")
    with open(strings, "w") as f:
        f.write('{"step": 1, "loss": "2.5", "lr": 0.1}\n{"step": 2, "loss": "2.0", "lr": 0.1}\n')
    result = plot("--out", os.path.join(tmp, "s"), strings)
    assert result.returncode == 0, result.stderr
    assert (f'{strings}:1: "loss" is "2.5", not a number: 2 such value(s) of "loss" not drawn'
            in result.stderr), result.stderr


def main():
    with tempfile.TemporaryDirectory() as tmp:
        write_run(os.path.join(tmp, "baseline"), [10.0, 9.0, 8.5])
        write_run(os.path.join(tmp, "bf16"), [10.5, 9.5, 8.0])
        out = os.path.join(tmp, "charts", "compare")
        result = subprocess.run([TITAN_PLOT, "--out", out, "--size", "640x480",
                                 os.path.join(tmp, "baseline"),
                                 "mixed=" + os.path.join(tmp, "bf16", "metrics.jsonl")],
                                capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        image = matplotlib.image.imread(out + ".png")
        assert image.shape[:2] == (480, 640), f"PNG is {image.shape[1]}x{image.shape[0]}"
        # Both runs drawn: the first run's colour (C0) and the second's (C1) are on the chart.
        assert has_color(image, "#1f77b4") and has_color(image, "#ff7f0e"), "a run is missing"
        svg = open(out + ".svg").read()
        for gid in ["baseline:loss", "mixed:loss", "baseline:eval_loss", "mixed:eval_loss",
                    "baseline:mfu", "mixed:tps"]:
            assert f'id="{gid}"' in svg, f"no line {gid} in the SVG"
        assert ">mixed<" in svg and ">baseline<" in svg, "the legend does not name both runs"

        bad = subprocess.run([TITAN_PLOT, "--size", "640", os.path.join(tmp, "baseline")],
                             capture_output=True, text=True)
        assert bad.returncode == 2 and "--size: expected WIDTHxHEIGHT" in bad.stderr, bad.stderr
        missing = subprocess.run([TITAN_PLOT, os.path.join(tmp, "nothing")],
                                 capture_output=True, text=True)
        assert missing.returncode == 2 and "cannot read the run" in missing.stderr, missing.stderr
        check_bad_inputs(tmp)
    print("1 passed, 0 failed")


if __name__ == "__main__":
    main()
