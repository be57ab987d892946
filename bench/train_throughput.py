#!/usr/bin/python3
"""Training throughput: titan next to PyTorch on the same model shapes, in one run.

Usage: /usr/bin/python3 bench/train_throughput.py build/bin/titan_train_bench
           [--threads 2] [--steps 5] [--configs debugmodel,34M] [--precisions f32,bf16]
           [--pypi-torch "$(bench/torch-venv)"]
(--configs tiny takes seconds: the `bench` CTest label runs it so the command keeps working.)

Each side trains with AdamW (betas 0.9/0.95, weight decay 0.1), gradient clipping at 1.0 and
random tokens, on the same thread count, one process per measurement. A step is forward,
backward, clipping and the optimizer update; the median of --steps steps after one warm-up step
is reported. titan runs with titan-run's OpenMP wait policy (OMP_WAIT_POLICY=passive unless the
environment sets one); PyTorch with the environment's. Without --pypi-torch, PyTorch is Debian's
python3-torch (1.13) and runs twice: with the BLAS it loads by default, and with OpenBLAS's
OpenMP build, the BLAS titan links (so the ratio is not only a BLAS choice). With --pypi-torch
PYTHON (a venv's python with PyTorch from PyPI, which bench/torch-venv makes and prints), PyTorch
runs three times: PyPI's eager, PyPI's with the forward under torch.compile (its backward
compiled with it), and Debian's with its default BLAS.
A compiled run takes two untimed warm-up steps, the compilation in the first, instead of one.
In bf16, titan's matmuls take bf16 operands (mixed_precision_param = "bfloat16") and PyTorch's
forward runs under torch.autocast("cpu", dtype=torch.bfloat16), with its default libraries.
MFU counts 6 FLOPs per non-embedding parameter per token plus 6 * layers * dim * seq_len for
causal attention (core/train/metrics.h), against the best f32 matmul rate (2048^3) measured here
by OpenBLAS and by each torch.
Prints Markdown tables for docs/benchmarks.md: the figures; titan's step by kernel (each titan
measurement profiles one more step after its timed ones: every kernel's milliseconds and share,
and the time outside kernels); then each measurement's warm-up time and the 1-minute load
average before and after it (the machine may be shared).
"""
import argparse
import collections
import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kernel_spans  # noqa: E402  (bench/kernel_spans.py, beside this script)

CONFIGS = {
    # name: dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len, batch
    "debugmodel": dict(dim=256, n_layers=6, n_heads=16, n_kv_heads=16, vocab_size=2048,
                       seq_len=256, batch=8),
    "34M": dict(dim=512, n_layers=8, n_heads=8, n_kv_heads=4, vocab_size=8192,
                seq_len=512, batch=4),
    # Seconds, not a measurement: the `bench` CTest label runs it so this script keeps working.
    "tiny": dict(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=256, seq_len=32,
                 batch=2),
}
OPENMP_OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-openmp"


def hidden_dim(dim, multiple_of=256):
    """LlamaConfig::hidden_dim without a multiplier."""
    hidden = 2 * (4 * dim) // 3
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def torch_child(config, steps, threads, bf16=False, compiled=False):
    """Runs in a fresh process: trains the PyTorch reference model, prints one JSON line."""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                    "reference"))
    import llama_reference as ref
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    c = dict(config, hidden_dim=hidden_dim(config["dim"]), norm_eps=1e-5, rope_theta=500000.0,
             tie_embeddings=0)
    d, hd, f, vocab = c["dim"], c["dim"] // c["n_heads"], c["hidden_dim"], c["vocab_size"]
    shapes = {"tok_embeddings": (vocab, d)}
    for layer in range(c["n_layers"]):
        for name, shape in [("attention_norm", (d,)), ("attention.wq", (c["n_heads"] * hd, d)),
                            ("attention.wk", (c["n_kv_heads"] * hd, d)),
                            ("attention.wv", (c["n_kv_heads"] * hd, d)),
                            ("attention.wo", (d, c["n_heads"] * hd)), ("ffn_norm", (d,)),
                            ("feed_forward.w1", (f, d)), ("feed_forward.w2", (d, f)),
                            ("feed_forward.w3", (f, d))]:
            shapes[f"layers.{layer}.{name}"] = shape
    shapes["norm"], shapes["output"] = (d,), (vocab, d)
    p = {name + ".weight": (torch.ones(s) if len(s) == 1 else torch.randn(*s) * 0.02)
         .requires_grad_(True) for name, s in shapes.items()}
    optimizer = torch.optim.AdamW(p.values(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    shape = (c["batch"], c["seq_len"])
    tokens, targets = torch.randint(0, vocab, shape), torch.randint(0, vocab, shape)
    forward = torch.compile(ref.forward) if compiled else ref.forward
    warmup = 2 if compiled else 1  # the first compiled step compiles; the second proves it is done
    times = []
    for step in range(warmup + steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            _, loss = forward(c, p, tokens, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(p.values(), 1.0)
        optimizer.step()
        times.append(time.perf_counter() - start)
    timed = sorted(times[warmup:])
    step_s = timed[len(timed) // 2]
    print(json.dumps({"step_s": step_s, "tokens_per_s": c["batch"] * c["seq_len"] / step_s,
                      "warmup_s": sum(times[:warmup]), "peak_rss_gib": peak_rss_gib()}))


def peak_rss_gib():
    """This process's own peak (VmHWM): ru_maxrss would include the parent's, torch loaded."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 2**20  # KiB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def run(command, env_extra):
    env = dict(os.environ, **env_extra)
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        sys.exit(f"train_throughput: {' '.join(command[:3])} ... failed "
                 f"(exit {done.returncode}):\n{done.stderr.strip()}")
    return done.stdout.strip().splitlines()[-1]


class Progress:
    """One line on stderr per measurement, with the time so far and an estimate of what is left."""

    def __init__(self, total):
        self.total, self.done, self.start = total, 0, time.monotonic()

    def next(self, what):
        elapsed = time.monotonic() - self.start
        eta = (f"ETA {elapsed / self.done * (self.total - self.done):.0f}s" if self.done
               else "ETA unknown")
        self.done += 1
        print(f"[bench] {self.done}/{self.total} {what}: {elapsed:.0f}s so far, {eta}",
              file=sys.stderr, flush=True)


def titan(binary, config, steps, threads, bf16, profile_dir):
    """Times titan's step; then one more, profiled, step writes its trace under profile_dir."""
    args = [binary, "--steps", str(steps), "--bf16", str(int(bf16)), "--profile_dir", profile_dir]
    for key, value in config.items():
        args += [f"--{key}", str(value)]
    fields = run(args, {"OMP_NUM_THREADS": str(threads),
                        "OMP_WAIT_POLICY": titan_wait_policy()}).split()
    result = {k: float(v) for k, v in zip(fields[::2], fields[1::2])}
    traces = glob.glob(os.path.join(profile_dir, "iteration_*", "rank0_trace.json"))
    if len(traces) != 1:
        sys.exit(f"train_throughput: {binary} wrote {len(traces)} traces under {profile_dir}, "
                 "expected one")
    result["kernels"] = kernel_spans.kernel_times(traces[0])
    result["profiled_step_ms"] = kernel_spans.step_ms(traces[0])
    return result


def titan_wait_policy():
    """titan-run's OpenMP wait policy: passive unless the environment sets one."""
    return os.environ.get("OMP_WAIT_POLICY", "passive")


def print_kernel_profile(profiles):
    """Where titan's profiled step went, by kernel, one column per config and precision."""
    names = collections.Counter()
    for _, (totals, _), _ in profiles:
        names.update(totals)
    print("\ntitan's step by kernel (one profiled step after the timed ones; ms, and the share "
          "of the step):\n")
    print("| kernel | " + " | ".join(label for label, _, _ in profiles) + " |")
    print("|---|" + "---:|" * len(profiles))
    def cell(ms, step):
        return f"{ms:.1f} ({100 * ms / step:.0f}%)" if step > 0 else f"{ms:.1f}"
    for name, _ in names.most_common():
        print(f"| {name} | " + " | ".join(cell(totals.get(name, 0.0), step)
                                          for _, (totals, _), step in profiles) + " |")
    print("| outside kernels | " + " | ".join(cell(step - sum(totals.values()), step)
                                             for _, (totals, _), step in profiles) + " |")
    print("| step | " + " | ".join(f"{step:.1f}" for _, _, step in profiles) + " |")


def titan_kernels(binary):
    """The kernels titan_train_bench names on stderr: GEMM libraries, vector instruction set."""
    args = [binary, "--steps", "1"]
    for key, value in CONFIGS["tiny"].items():
        args += [f"--{key}", str(value)]
    done = subprocess.run(args, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True,
                          text=True)
    lines = [line for line in done.stderr.splitlines() if "GEMM" in line]
    return lines[0].split(": ", 1)[-1] if lines else "not reported"


def torch_capability(python):
    """The instruction set PyTorch's own CPU kernels dispatch to (torch 2.0 and later)."""
    code = ("import torch, torch.backends\n"
            "try:\n    import torch.backends.cpu as cpu; print(cpu.get_cpu_capability())\n"
            "except (ImportError, AttributeError):\n    print('not reported (torch < 2.0)')")
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or "not reported"


class Peer:
    """One PyTorch column: which python runs it, with which libraries, eager or compiled."""

    def __init__(self, label, python, env=None, compiled=False):
        self.label, self.python, self.env, self.compiled = label, python, env or {}, compiled

    def child(self, mode, argument, threads):
        env = dict(self.env, OMP_NUM_THREADS=str(threads))
        return json.loads(run([self.python, os.path.abspath(__file__), mode,
                               json.dumps(argument)], env))

    def train(self, config, steps, threads, bf16):
        return self.child("--torch-child", [config, steps, threads, bf16, self.compiled], threads)


def peers(pypi_python):
    """Debian's torch twice (its BLAS, titan's), or PyPI's eager and compiled and Debian's."""
    if not pypi_python:
        return [Peer("Debian BLAS", sys.executable),
                Peer("OpenMP OpenBLAS", sys.executable, {"LD_LIBRARY_PATH": OPENMP_OPENBLAS})]
    version = torch_version(pypi_python)
    if int(version.split(".")[0]) < 2:
        sys.exit(f"train_throughput: --pypi-torch {pypi_python} has torch {version}, expected 2.0 "
                 "or later (torch.compile); make one with bench/torch-venv")
    return [Peer(f"PyPI {version}", pypi_python),
            Peer(f"PyPI {version} compiled", pypi_python, compiled=True),
            Peer(f"Debian {torch_version(sys.executable)}", sys.executable)]


def torch_version(python):
    """The version of the torch that PYTHON imports, without its local part (+cu130, +git...)."""
    if not os.access(python, os.X_OK) or os.path.isdir(python):
        sys.exit(f"train_throughput: --pypi-torch {python} is not an executable; expected a "
                 "python with PyTorch, such as bench/torch-venv prints")
    done = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"train_throughput: {python} cannot import torch (exit {done.returncode}); "
                 f"expected a python with PyTorch, such as bench/torch-venv prints:\n"
                 f"{done.stderr.strip()}")
    return done.stdout.strip().split("+")[0]


def torch_peak_child(threads):
    """Runs in a fresh process: the best of four 2048^3 f32 matmuls, in GFLOP/s."""
    import torch
    torch.set_num_threads(threads)
    n = 2048
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    best = 0.0
    for _ in range(4):
        start = time.perf_counter()
        a @ b
        best = max(best, 2 * n**3 / (time.perf_counter() - start) / 1e9)
    print(json.dumps(best))


def joined(form, values):
    """One table cell for all PyTorch columns, in their order: "1.41 / 0.62 / 2.25"."""
    return " / ".join(form.format(v) for v in values)


def load_average():
    return os.getloadavg()[0]


def main():
    if len(sys.argv) == 3 and sys.argv[1] in ("--torch-child", "--torch-peak"):
        child = torch_child if sys.argv[1] == "--torch-child" else torch_peak_child
        child(*json.loads(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("titan_bench")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--configs", default="debugmodel,34M")
    parser.add_argument("--precisions", default="f32,bf16")
    parser.add_argument("--pypi-torch", metavar="PYTHON",
                        help="python of a venv with PyTorch from PyPI (bench/torch-venv prints it)")
    args = parser.parse_args()
    if not os.access(args.titan_bench, os.X_OK):
        sys.exit(f"train_throughput: {args.titan_bench} is not an executable; build it with "
                 "cmake --build build --target titan_train_bench")
    unknown = [name for name in args.configs.split(",") if name not in CONFIGS]
    if unknown:
        sys.exit(f"train_throughput: unknown config {unknown[0]!r}; known: {', '.join(CONFIGS)}")
    precisions = args.precisions.split(",")
    if any(p not in ("f32", "bf16") for p in precisions):
        sys.exit(f"train_throughput: --precisions takes f32 and/or bf16, found {args.precisions!r}")
    threads = str(args.threads)
    columns = peers(args.pypi_torch)
    print(f"CPU: {cpu_model()}; flags: {' '.join(cpu_flags())}")
    print(f"titan: {titan_kernels(args.titan_bench)}; OMP_WAIT_POLICY={titan_wait_policy()} "
          "(titan-run's default is passive); PyTorch: OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY', 'unset (its default)')}")
    for python in dict.fromkeys(peer.python for peer in columns):
        print(f"PyTorch ({python}): its CPU kernels for {torch_capability(python)}")
    titan_peak = float(run([args.titan_bench, "--peak"], {"OMP_NUM_THREADS": threads}).split()[1])
    pythons = dict.fromkeys(peer.python for peer in columns)
    torch_peaks = [Peer("", python).child("--torch-peak", [args.threads], args.threads)
                   for python in pythons]
    peak = max([titan_peak] + torch_peaks)
    print(f"matmul peak: {peak:.1f} GFLOP/s (f32; OpenBLAS measured {titan_peak:.1f}, torch "
          f"{' and '.join(f'{p:.1f}' for p in torch_peaks)}), {args.threads} threads; MFU is "
          "against this f32 peak in both precisions", flush=True)
    labels = [peer.label for peer in columns]
    print(f"PyTorch columns: {', '.join(labels)}; a cell 'a / b / ...' lists them in this order"
          + ("; compiled: torch.compile's warm-up steps are not timed" if args.pypi_torch else ""))
    print("\n| config | precision | titan tok/s | "
          + " | ".join(f"PyTorch tok/s ({label})" for label in labels)
          + " | titan / PyTorch | titan MFU | PyTorch MFU | titan peak RSS GiB | PyTorch peak RSS "
          "GiB |")
    print("|---|---|---:|" + "---:|" * len(columns) + "---:|---:|---:|---:|---:|")
    rows = [(name, precision) for name in args.configs.split(",") for precision in precisions]
    progress = Progress((1 + len(columns)) * len(rows))
    log = []  # (config, precision, side, warm-up s, load before, load after)

    def measure(side, work):
        progress.next(f"{side} {name} {precision}")
        before = load_average()
        result = work()
        log.append((name, precision, side, result.get("warmup_s"), before, load_average()))
        return result

    profiles = []  # (config and precision, kernel times, profiled step ms)
    trace_root = tempfile.mkdtemp(prefix="titan-train-throughput-")
    for name, precision in rows:
        config, bf16 = CONFIGS[name], precision == "bf16"
        profile_dir = os.path.join(trace_root, f"{name}-{precision}")
        ours = measure("titan", lambda: titan(args.titan_bench, config, args.steps, args.threads,
                                              bf16, profile_dir))
        profiles.append((f"{name} {precision}", ours["kernels"], ours["profiled_step_ms"]))
        theirs = [measure(f"PyTorch ({peer.label})",
                          lambda: peer.train(config, args.steps, args.threads, bf16))
                  for peer in columns]
        gflops = ours["flop_per_token"] / 1e9
        print(f"| {name} | {precision} | {ours['tokens_per_s']:.0f} | "
              + " | ".join(f"{r['tokens_per_s']:.0f}" for r in theirs) + " | "
              + joined("{:.2f}", [ours["tokens_per_s"] / r["tokens_per_s"] for r in theirs])
              + f" | {100 * ours['tokens_per_s'] * gflops / peak:.0f}% | "
              + joined("{:.0f}%", [100 * r["tokens_per_s"] * gflops / peak for r in theirs])
              + f" | {ours['peak_rss_gib']:.2f} | "
              + joined("{:.2f}", [r["peak_rss_gib"] for r in theirs]) + " |", flush=True)

    print_kernel_profile(profiles)
    shutil.rmtree(trace_root, ignore_errors=True)

    print("\n| config | precision | measured | untimed warm-up s | load before | load after |")
    print("|---|---|---|---:|---:|---:|")
    for name, precision, side, warmup_s, before, after in log:
        warmup = "-" if warmup_s is None else f"{warmup_s:.1f}"
        print(f"| {name} | {precision} | {side} | {warmup} | {before:.2f} | {after:.2f} |")


def cpu_model():
    with open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def cpu_flags():
    """The vector extensions that decide which kernels run (AVX2, AVX-512, bf16, AMX)."""
    with open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("flags"):
                flags = line.split(":", 1)[1].split()
                return [f for f in flags if f.startswith(("avx", "amx", "fma"))]
    return []


if __name__ == "__main__":
    main()
