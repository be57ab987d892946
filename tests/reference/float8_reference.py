#!/usr/bin/python3
"""PyTorch emulation of torchao's Float8 linear (torchao.float8: Float8LinearConfig's recipes,
hp_tensor_to_float8_dynamic, matmul_with_hp_or_float8_args) for titan's float8 reference test.
Debian's torch 1.13 has no float8 dtypes, so the cast is emulated with f32 ops from the OCP FP8
definition (round to nearest even on the format's grid, after torchao's clamp to the largest
finite value), independently of titan's C++.

Usage: /usr/bin/python3 float8_reference.py CASE_DIR

CASE_DIR holds case.txt ("key value" lines: recipe, n, in, out) and x.bin f32 [n, in],
w.bin f32 [out, in], dy.bin f32 [n, out]. It receives y.bin [n, out] = x w^T, dx.bin [n, in] and
dw.bin [out, in], and for each Float8 GEMM operand (output_a = x, output_b = w, grad_input_a =
dy, grad_input_b = w^T, grad_weight_a = dy^T, grad_weight_b = x^T; each with the reduced
dimension last) NAME_codes.bin (u8, the OCP codes) and NAME_scales.bin (f32 inverse scales).

Float8Linear (an autograd function) is the same linear layer for a model's reference:
qwen3_reference.py runs each routed expert's group of rows through it, as torchao's scaled
grouped GEMM quantizes each group on its own.
"""
import os
import sys

import numpy as np
import torch

E4M3 = {"mbits": 3, "bias": 7, "max": 448.0}
E5M2 = {"mbits": 2, "bias": 15, "max": 57344.0}
EPS = 1e-12  # torchao.float8.float8_utils.EPS


def recipe_config(name):
    """torchao's Float8LinearConfig.from_recipe_name, as (dtype, granularity) per cast."""
    if name == "tensorwise":
        i = w = (E4M3, "tensor")
        go = (E5M2, "tensor")
        return {"input": i, "weight": w, "grad_output": go, "input_for_grad_weight": i,
                "weight_for_grad_input": w, "grad_output_for_grad_weight": go, "pow2": False}
    if name == "rowwise":
        c = (E4M3, "axis")
        return {"input": c, "weight": c, "grad_output": c, "input_for_grad_weight": c,
                "weight_for_grad_input": c, "grad_output_for_grad_weight": c, "pow2": True}
    if name == "rowwise_with_gw_hp":
        c = (E4M3, "axis")
        return {"input": c, "weight": c, "grad_output": c, "input_for_grad_weight": (None, None),
                "weight_for_grad_input": (E4M3, "tensor"),
                "grad_output_for_grad_weight": (None, None), "pow2": True}
    sys.exit(f"unknown recipe {name}")


def round_to_grid(y, fmt):
    """y (f32, within +-max) rounded to the nearest value of the format, ties to even."""
    mbits, min_exp = fmt["mbits"], 1 - fmt["bias"]
    a = y.abs()
    _, e = torch.frexp(a)  # a = m 2^e with m in [0.5, 1): the leading bit is 2^(e - 1)
    exponent = torch.clamp(e - 1, min=min_exp)
    quantum = torch.pow(2.0, (exponent - mbits).double()).float()
    q = torch.round(a / quantum) * quantum  # torch.round: half to even
    q = torch.clamp(q, max=fmt["max"])
    return torch.where(torch.signbit(y), -q, q)


def codes_of(v, fmt):
    """The OCP code of each grid value v (sign, biased exponent, mantissa)."""
    mbits, bias, min_exp = fmt["mbits"], fmt["bias"], 1 - fmt["bias"]
    v64 = v.double()
    a = v64.abs()
    sign = torch.signbit(v64).long() << 7
    _, e = torch.frexp(a)
    e = e - 1
    subnormal = (e < min_exp) | (a == 0)
    mant_sub = (a / 2.0 ** (min_exp - mbits)).round().long()
    mant_norm = (a / torch.pow(2.0, (e - mbits).double())).round().long() - (1 << mbits)
    field = torch.where(subnormal, mant_sub, ((e + bias) << mbits) | mant_norm)
    return (sign | field).to(torch.uint8)


def to_float8(hp, cc, axiswise_dim, pow2):
    """torchao's hp_tensor_to_float8_dynamic: (values on the grid, codes, inverse scale)."""
    fmt, granularity = cc
    if granularity == "tensor":
        amax = hp.abs().max()
    else:
        amax = hp.abs().amax(dim=axiswise_dim, keepdim=True)
    scale = (fmt["max"] / torch.clamp(amax.double(), min=EPS)).float()
    if pow2:
        scale = torch.exp2(torch.floor(torch.log2(scale)))
    y = torch.clamp(hp * scale, min=-fmt["max"], max=fmt["max"])
    values = round_to_grid(y, fmt)
    return values, codes_of(values, fmt), scale.reciprocal()


def scaled_mm(a, inv_a, b, inv_b):
    """torch._scaled_mm: the products of the float8 values summed, then the scales applied."""
    return (a.double() @ b.double()).float() * inv_a * inv_b


def output_gemm(x, w, cfg):
    """output = input @ weight_t: the input per row (axiswise_dim -1), the weight_t per column
    (axiswise_dim 0), that is per row of w. Returns y and the operands' (codes, inverse scales)
    as Float8Gemm takes them."""
    xi, xc, xs = to_float8(x, cfg["input"], -1, cfg["pow2"])
    wt, wc, ws = to_float8(w.t(), cfg["weight"], 0, cfg["pow2"])
    return scaled_mm(xi, xs, wt, ws), (xc, xs), (wc.t(), ws)


def grad_input_gemm(dy, w, cfg):
    """grad_input = grad_output @ weight_t.t(): grad_output per row, weight_t per row."""
    gi, gc, gs = to_float8(dy, cfg["grad_output"], -1, cfg["pow2"])
    wt, wc, ws = to_float8(w.t(), cfg["weight_for_grad_input"], -1, cfg["pow2"])
    return scaled_mm(gi, gs, wt.t(), ws.t()), (gc, gs), (wc, ws)


def grad_weight_gemm(dy, x, cfg):
    """grad_weight = grad_output.t() @ input: both per column (axiswise_dim 0), or in high
    precision (no operands) where the recipe disables their cast."""
    if cfg["grad_output_for_grad_weight"][0] is None:
        return (dy.double().t() @ x.double()).float(), None, None
    g, gc, gs = to_float8(dy, cfg["grad_output_for_grad_weight"], 0, cfg["pow2"])
    xf, xc, xs = to_float8(x, cfg["input_for_grad_weight"], 0, cfg["pow2"])
    return scaled_mm(g.t(), gs.t(), xf, xs), (gc.t(), gs), (xc.t(), xs)


class Float8Linear(torch.autograd.Function):
    """y = x w^T as torchao's Float8Linear computes it under a recipe (recipe_config's), x
    [rows, in] and w [out, in]: every GEMM of the forward and the backward on Float8 operands.
    On one expert's group of rows it is torchao's scaled grouped GEMM for that group."""

    @staticmethod
    def forward(ctx, x, w, cfg):
        ctx.save_for_backward(x, w)
        ctx.cfg = cfg
        return output_gemm(x, w, cfg)[0]

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        return grad_input_gemm(dy, w, ctx.cfg)[0], grad_weight_gemm(dy, x, ctx.cfg)[0], None


def main(case):
    config = {}
    with open(os.path.join(case, "case.txt")) as f:
        for line in f:
            key, value = line.split()
            config[key] = value
    n, k, o = int(config["n"]), int(config["in"]), int(config["out"])
    cfg = recipe_config(config["recipe"])

    def load(name, shape):
        data = np.fromfile(os.path.join(case, name), dtype=np.float32).reshape(shape)
        return torch.from_numpy(data.copy())

    def save(name, tensor):
        tensor.contiguous().numpy().tofile(os.path.join(case, name))

    x, w, dy = load("x.bin", (n, k)), load("w.bin", (o, k)), load("dy.bin", (n, o))
    for name, out, gemm in (("output", "y.bin", output_gemm(x, w, cfg)),
                            ("grad_input", "dx.bin", grad_input_gemm(dy, w, cfg)),
                            ("grad_weight", "dw.bin", grad_weight_gemm(dy, x, cfg))):
        result, a, b = gemm
        save(out, result)
        for suffix, operand in (("_a", a), ("_b", b)):
            if operand is not None:
                save(name + suffix + "_codes.bin", operand[0])
                save(name + suffix + "_scales.bin", operand[1].reshape(-1).float())


if __name__ == "__main__":
    main(sys.argv[1])
