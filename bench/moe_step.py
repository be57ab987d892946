#!/usr/bin/python3
"""A mixture of experts' training step against a dense model of as many active parameters:
titan next to PyTorch on the same qwen3 shapes, in one run.

Usage: /usr/bin/python3 bench/moe_step.py build/bin/titan_train_bench
           [--threads 2] [--steps 5] [--configs debugmodel] [--precisions f32,bf16]
           [--pypi-torch "$(bench/torch-venv)"]
(--configs tiny takes seconds: the `bench` CTest label runs it so the command keeps working.)

debugmodel is the qwen3 family (QK-norm, untied output) at the debug model's width: dim 256,
6 blocks, 16 heads, vocabulary 2048, 8 sequences of 256 tokens. Its dense flavor has a SwiGLU of
512 features in every block; its MoE flavor 8 experts of 256 features, 2 per token, so both
compute with 3 x 256 x 512 feed-forward weights per token and block (the MoE adds the router).

titan runs titan_train_bench (--qwen3 1 --hidden 512, or --experts 8 --top_k 2
--expert_hidden 256). PyTorch trains tests/reference/qwen3_reference.py's attention and SwiGLU
with the mixture of experts TorchTitan runs on a CPU (torchtitan/models/common/moe.py with its
LocalTokenDispatcher and GroupedExperts' for-loop over experts): the gate and the softmax in f32,
the top-k, the weights normalized over the chosen experts; the tokens permuted by a stable sort
of their experts, each expert's SwiGLU on its slice, the outputs weighted in f32 and
scatter-added back. No load-balancing bias (titan_train_bench has none either).

Each side trains with AdamW (betas 0.9/0.95, weight decay 0.1), gradient clipping at 1.0 and
random tokens, on the same thread count, one process per measurement, as
bench/train_throughput.py does: the median of --steps steps after one warm-up step (two for
torch.compile, the compilation in the first). Without --pypi-torch, PyTorch is Debian's
python3-torch (1.13); with --pypi-torch PYTHON (bench/torch-venv prints one) it is that PyTorch
eager, the same compiled as TorchTitan's apply_compile compiles (each block under
torch.compile(fullgraph=True), the expert counts captured as data-dependent sizes), and Debian's.
In bf16, titan's matmuls take bf16 operands and PyTorch's forward runs under
torch.autocast("cpu", dtype=torch.bfloat16).
Prints the CPU model and flags, then Markdown tables for docs/benchmarks.md: each flavor's step,
the MoE's step over the dense one's for each side, and each measurement's untimed warm-up with
the 1-minute load average before and after it (the machine may be shared).
"""
import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_throughput import (Progress, cpu_flags, cpu_model, joined,  # noqa: E402
                              load_average, peak_rss_gib)

CONFIGS = {
    # name: the model both flavors share, the dense feed-forward's width, and the experts'
    "debugmodel": dict(dim=256, n_layers=6, n_heads=16, n_kv_heads=16, vocab_size=2048,
                       seq_len=256, batch=8, hidden=512, experts=8, top_k=2, expert_hidden=256),
    # Seconds, not a measurement: the `bench` CTest label runs it so this script keeps working.
    "tiny": dict(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=256, seq_len=32,
                 batch=2, hidden=64, experts=4, top_k=2, expert_hidden=32),
}
SHARED = ("dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len", "batch")
FLAVORS = ("dense", "moe")


def fail(message):
    sys.exit(f"moe_step: {message}")


def flavor_label(config, flavor):
    if flavor == "dense":
        return f"dense, {config['hidden']} features"
    return (f"{config['experts']} experts of {config['expert_hidden']}, "
            f"{config['top_k']} per token")


def titan_args(config, flavor):
    keys = ("qwen3", "hidden") if flavor == "dense" else ("experts", "top_k", "expert_hidden")
    values = dict(config, qwen3=1)
    return [part for key in SHARED + keys for part in (f"--{key}", str(values[key]))]


def import_torch():
    """torch, F and qwen3_reference (ref) as globals, in a PyTorch child only: the parent runs
    without them, and torch.compile traces the model's functions without imports inside."""
    global torch, F, ref
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                    "reference"))
    import torch
    import torch.nn.functional as F
    import qwen3_reference as ref


def torchtitan_moe(x, p, prefix, c):
    """TorchTitan's MoE forward on one rank (no expert parallelism, no shared experts)."""
    b, t, d = x.shape
    x_TD = x.reshape(-1, d)
    # TokenChoiceTopKRouter: the gate and the softmax in f32 even under autocast.
    with torch.autocast("cpu", enabled=False):
        scores_TE = F.softmax(x_TD.float() @ p[prefix + "router.gate.weight"].float().t(), dim=-1)
    _, experts_TK = torch.topk(scores_TE, k=c["top_k"], dim=-1, sorted=False)
    scores_TK = scores_TE.gather(dim=-1, index=experts_TK)
    scores_TK = scores_TK / (scores_TK.sum(dim=-1, keepdim=True) + 1e-20)  # route_norm
    tokens_per_expert_E = torch.zeros_like(scores_TE, dtype=torch.bool).scatter_(
        -1, experts_TK, True).sum(dim=0)
    # LocalTokenDispatcher.dispatch: the token copies grouped by expert (torch.sort, not
    # argsort: Debian's torch 1.13 has no stable argsort).
    order_N = torch.sort(experts_TK.view(-1), stable=True).indices
    scores_N = scores_TK.view(-1)[order_N]
    token_N = order_N // c["top_k"]
    routed_ND = x_TD[token_N]
    # GroupedExperts' for-loop: each expert's SwiGLU on its slice of the grouped tokens.
    w1, w2, w3 = (p[prefix + f"experts.{w}"] for w in ("w1", "w2", "w3"))
    outputs = []
    for expert, x_expert in enumerate(torch.split(routed_ND, tokens_per_expert_E.tolist())):
        h = F.silu(x_expert @ w1[expert].t()) * (x_expert @ w3[expert].t())
        outputs.append(h @ w2[expert].t())
    routed_out_ND = torch.cat(outputs).type_as(x_TD)
    # LocalTokenDispatcher.combine: weighted in f32, scatter-added into each token's row.
    weighted_ND = (routed_out_ND.float() * scores_N.reshape(-1, 1)).to(routed_out_ND.dtype)
    out_TD = torch.zeros_like(x_TD).scatter_add(0, token_N.reshape(-1, 1).expand(-1, d),
                                                weighted_ND)
    return out_TD.view(b, t, d)


def block(h, lp, c, freqs_cis):
    """One transformer block; lp holds its parameters without the "layers.N." prefix, so that
    torch.compile traces it once for every block (as TorchTitan compiles each block)."""
    eps = c["norm_eps"]
    h = h + ref.attention(ref.rms_norm(h, lp["attention_norm.weight"], eps), lp, "attention.", c,
                          freqs_cis)
    normed = ref.rms_norm(h, lp["ffn_norm.weight"], eps)
    if c["experts"] > 0:
        return h + torchtitan_moe(normed, lp, "moe.", c)
    return h + ref.swiglu(normed, lp["feed_forward.w1.weight"], lp["feed_forward.w2.weight"],
                          lp["feed_forward.w3.weight"])


def model_forward(c, p, layers, tokens, targets, run_block):
    """qwen3_reference.forward with torchtitan_moe for its plain loop over experts, each block
    run by run_block (block, or block compiled)."""
    n = tokens.numel()
    freqs_cis = ref.rope_frequencies(c["head_dim"], c["seq_len"], c["rope_theta"])
    h = p["tok_embeddings.weight"][tokens]
    for lp in layers:
        h = run_block(h, lp, c, freqs_cis)
    logits = ref.linear(ref.rms_norm(h, p["norm.weight"], c["norm_eps"]), p["output.weight"])
    logits = logits.view(n, -1)
    return logits, F.cross_entropy(logits, targets.reshape(n))


def parameter_shapes(c):
    d, hd, vocab = c["dim"], c["head_dim"], c["vocab_size"]
    shapes = {"tok_embeddings.weight": (vocab, d)}
    for layer in range(c["n_layers"]):
        prefix = f"layers.{layer}."
        attention = {"wq": (c["n_heads"] * hd, d), "wk": (c["n_kv_heads"] * hd, d),
                     "wv": (c["n_kv_heads"] * hd, d), "wo": (d, c["n_heads"] * hd),
                     "q_norm": (hd,), "k_norm": (hd,)}
        for name, shape in attention.items():
            shapes[f"{prefix}attention.{name}.weight"] = shape
        shapes[prefix + "attention_norm.weight"] = shapes[prefix + "ffn_norm.weight"] = (d,)
        if c["experts"] > 0:
            e, f = c["experts"], c["expert_hidden"]
            shapes[prefix + "moe.router.gate.weight"] = (e, d)
            shapes[prefix + "moe.experts.w1"] = shapes[prefix + "moe.experts.w3"] = (e, f, d)
            shapes[prefix + "moe.experts.w2"] = (e, d, f)
        else:
            f = c["hidden"]
            shapes[prefix + "feed_forward.w1.weight"] = (f, d)
            shapes[prefix + "feed_forward.w3.weight"] = (f, d)
            shapes[prefix + "feed_forward.w2.weight"] = (d, f)
    shapes["norm.weight"], shapes["output.weight"] = (d,), (vocab, d)
    return shapes


def torch_child(config, flavor, steps, threads, bf16, compiled):
    """Runs in a fresh process: trains the PyTorch model, prints one JSON line."""
    import_torch()
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    c = dict(config, head_dim=config["dim"] // config["n_heads"], qk_norm=1, norm_eps=1e-5,
             rope_theta=1000000.0)
    if flavor == "dense":
        c["experts"] = 0
    p = {name: (torch.ones(s) if len(s) == 1 else torch.randn(*s) * 0.02).requires_grad_(True)
         for name, s in parameter_shapes(c).items()}
    optimizer = torch.optim.AdamW(p.values(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    shape = (c["batch"], c["seq_len"])
    vocab = c["vocab_size"]
    tokens, targets = torch.randint(0, vocab, shape), torch.randint(0, vocab, shape)
    layers = [{name[len(prefix):]: value for name, value in p.items() if name.startswith(prefix)}
              for prefix in (f"layers.{layer}." for layer in range(c["n_layers"]))]
    if compiled:
        # TorchTitan's apply_compile: each block under torch.compile(fullgraph=True), the expert
        # counts (.tolist()) traced as data-dependent sizes instead of breaking the graph.
        torch._dynamo.config.capture_scalar_outputs = True
        run_block = torch.compile(block, fullgraph=True)
    else:
        run_block = block
    warmup = 2 if compiled else 1  # the first compiled step compiles; the second proves it is done
    times = []
    for step in range(warmup + steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            _, loss = model_forward(c, p, layers, tokens, targets, run_block)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(p.values(), 1.0)
        optimizer.step()
        times.append(time.perf_counter() - start)
    timed = sorted(times[warmup:])
    step_s = timed[len(timed) // 2]
    print(json.dumps({"step_s": step_s, "tokens_per_s": c["batch"] * c["seq_len"] / step_s,
                      "warmup_s": sum(times[:warmup]), "peak_rss_gib": peak_rss_gib()}))


def run(command, env_extra):
    env = dict(os.environ, **env_extra)
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0 or not done.stdout.strip():
        fail(f"{' '.join(command[:3])} ... failed (exit {done.returncode}):\n"
             f"{done.stderr.strip()}")
    return done.stdout.strip().splitlines()[-1]


def titan(binary, config, flavor, steps, threads, bf16):
    command = [binary, "--steps", str(steps), "--bf16", str(int(bf16))]
    fields = run(command + titan_args(config, flavor), {"OMP_NUM_THREADS": str(threads)}).split()
    return {k: float(v) for k, v in zip(fields[::2], fields[1::2])}


class Peer:
    """One PyTorch column: which python runs it, with which libraries, eager or compiled."""

    def __init__(self, label, python, compiled=False):
        self.label, self.python, self.compiled = label, python, compiled

    def train(self, config, flavor, steps, threads, bf16):
        argument = [config, flavor, steps, threads, bf16, self.compiled]
        return json.loads(run([self.python, os.path.abspath(__file__), "--torch-child",
                               json.dumps(argument)], {"OMP_NUM_THREADS": str(threads)}))


def torch_version(python):
    """The version of the torch that PYTHON imports, without its local part (+cu132, ...)."""
    if not os.access(python, os.X_OK) or os.path.isdir(python):
        fail(f"--pypi-torch {python} is not an executable; expected a python with PyTorch, such "
             "as bench/torch-venv prints")
    done = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"{python} cannot import torch (exit {done.returncode}); expected a python with "
             f"PyTorch, such as bench/torch-venv prints:\n{done.stderr.strip()}")
    return done.stdout.strip().split("+")[0]


def peers(pypi_python):
    """Debian's torch alone, or PyPI's eager and compiled and Debian's."""
    debian = Peer(f"Debian {torch_version(sys.executable)}", sys.executable)
    if not pypi_python:
        return [debian]
    version = torch_version(pypi_python)
    if int(version.split(".")[0]) < 2:
        fail(f"--pypi-torch {pypi_python} has torch {version}, expected 2.0 or later "
             "(torch.compile); make one with bench/torch-venv")
    return [Peer(f"PyPI {version}", pypi_python),
            Peer(f"PyPI {version} compiled", pypi_python, compiled=True), debian]


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("titan_bench")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--configs", default="debugmodel")
    parser.add_argument("--precisions", default="f32,bf16")
    parser.add_argument("--pypi-torch", metavar="PYTHON",
                        help="python of a venv with PyTorch from PyPI (bench/torch-venv prints it)")
    args = parser.parse_args()
    if not os.access(args.titan_bench, os.X_OK):
        fail(f"{args.titan_bench} is not an executable; build it with "
             "cmake --build build --target titan_train_bench")
    unknown = [name for name in args.configs.split(",") if name not in CONFIGS]
    if unknown:
        fail(f"unknown config {unknown[0]!r}; known: {', '.join(CONFIGS)}")
    if any(p not in ("f32", "bf16") for p in args.precisions.split(",")):
        fail(f"--precisions takes f32 and/or bf16, found {args.precisions!r}")
    return args


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--torch-child":
        torch_child(*json.loads(sys.argv[2]))
        return
    args = parse_args()
    columns = peers(args.pypi_torch)
    labels = [peer.label for peer in columns]
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores; flags: {' '.join(cpu_flags())}")
    print(f"{args.threads} threads, median of {args.steps} steps after the warm-up; PyTorch "
          f"columns: {', '.join(labels)}; a cell 'a / b / ...' lists them in this order")
    print("\n| config | model | precision | feed-forward parameters per token and block | "
          "titan step s | titan tok/s | "
          + " | ".join(f"PyTorch tok/s ({label})" for label in labels) + " | titan / PyTorch |")
    print("|---|---|---|---:|---:|---:|" + "---:|" * len(columns) + "---:|", flush=True)
    rows = [(name, precision, flavor) for name in args.configs.split(",")
            for precision in args.precisions.split(",") for flavor in FLAVORS]
    progress = Progress((1 + len(columns)) * len(rows))
    log = []  # (config, precision, flavor, side, warm-up s, load before, load after)
    steps = {}  # (config, precision, flavor) -> [titan's step s, then each peer's]

    def measure(side, work):
        progress.next(f"{side} {name} {precision} {flavor}")
        before = load_average()
        result = work()
        log.append((name, precision, flavor, side, result.get("warmup_s"), before,
                    load_average()))
        return result

    for name, precision, flavor in rows:
        config, bf16 = CONFIGS[name], precision == "bf16"
        ours = measure("titan", lambda: titan(args.titan_bench, config, flavor, args.steps,
                                              args.threads, bf16))
        theirs = [measure(f"PyTorch ({peer.label})",
                          lambda: peer.train(config, flavor, args.steps, args.threads, bf16))
                  for peer in columns]
        steps[name, precision, flavor] = [ours["step_s"]] + [r["step_s"] for r in theirs]
        active = 3 * config["dim"] * (config["hidden"] if flavor == "dense"
                                      else config["top_k"] * config["expert_hidden"])
        print(f"| {name} | {flavor_label(config, flavor)} | {precision} | {active:,} | "
              f"{ours['step_s']:.3f} | {ours['tokens_per_s']:.0f} | "
              + " | ".join(f"{r['tokens_per_s']:.0f}" for r in theirs) + " | "
              + joined("{:.2f}", [ours["tokens_per_s"] / r["tokens_per_s"] for r in theirs])
              + " |", flush=True)

    print("\nThe MoE's step over the dense model's (1.00: the mixture costs nothing more):\n")
    print("| config | precision | titan | " + " | ".join(f"PyTorch ({label})" for label in labels)
          + " |")
    print("|---|---|---:|" + "---:|" * len(columns))
    for name in args.configs.split(","):
        for precision in args.precisions.split(","):
            ratios = [moe / dense for moe, dense in zip(steps[name, precision, "moe"],
                                                        steps[name, precision, "dense"])]
            print(f"| {name} | {precision} | " + " | ".join(f"{r:.2f}" for r in ratios) + " |")

    print("\n| config | precision | model | measured | untimed warm-up s | load before | "
          "load after |")
    print("|---|---|---|---|---:|---:|---:|")
    for name, precision, flavor, side, warmup_s, before, after in log:
        warmup = "-" if warmup_s is None else f"{warmup_s:.1f}"
        print(f"| {name} | {precision} | {flavor} | {side} | {warmup} | {before:.2f} | "
              f"{after:.2f} |")


if __name__ == "__main__":
    main()
