"""What the Hugging Face reference scripts of the model families share (hf_qwen3_reference.py,
hf_deepseek_v3_reference.py): a case's export checked against the tensors the family's
transformers model has and its logits against titan's, then a model drawn at random in
transformers' layout written out for titan to import (hf_made/ and hf_made_logits.bin).

A family is a Family of its functions; its script calls main(family).
"""
import collections
import json
import os
import shutil
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_llama_reference import (TOLERANCE, read_case, read_safetensors,  # noqa: E402
                                relative_error, write_in_two_files)

# check_config(config): asserts the config.json keys transformers reads, as titan writes them.
# expected_shapes(config): {tensor name: shape} of transformers' model.
# forward(config, weights, tokens, gaps): logits [batch * seq_len, vocab]; appends to `gaps` each
#   token's margin between the routing choices made and the next one.
# made(config, case, seed): (config.json, tensors) of a model in transformers' layout; `case` is
#   case.txt's values.
# min_routing_gap, routing: the least margin the comparison accepts (below it rounding may choose
#   otherwise in titan than here), and what the margin is between, for the message.
Family = collections.namedtuple(
    "Family", "check_config expected_shapes forward made min_routing_gap routing")


def logits_of(family, config, weights, tokens, what):
    gaps = []
    with torch.no_grad():
        logits = family.forward(config, weights, tokens, gaps)
    if gaps and min(gaps) < family.min_routing_gap:
        sys.exit(f"{what}: {family.routing} are {min(gaps):.3g} apart for some token: rounding "
                 "may choose either, so the comparison would prove nothing")
    return logits


def write_made(family, case, made, tensors, tokens):
    """hf_made/ as transformers saves a model: its config.json and the tensors in two files with
    an index; and its logits."""
    out = os.path.join(case, "hf_made")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(made, f, indent=2, sort_keys=True)
    write_in_two_files(out, tensors)
    logits = logits_of(family, made, tensors, tokens, "hf_made")
    logits.numpy().astype(np.float32).tofile(os.path.join(case, "hf_made_logits.bin"))


def run_case(family, case):
    c = read_case(case)
    export = os.path.join(case, "export")
    config = json.load(open(os.path.join(export, "config.json")))
    family.check_config(config)
    weights, metadata = read_safetensors(os.path.join(export, "model.safetensors"))
    assert metadata.get("format") == "pt", "transformers loads only format 'pt'"
    expected = family.expected_shapes(config)
    missing = sorted(set(expected) - set(weights))
    unexpected = sorted(set(weights) - set(expected))
    if missing or unexpected:
        sys.exit(f"{case}: missing keys {missing[:5]}, unexpected keys {unexpected[:5]}")
    for name, shape in expected.items():
        assert list(weights[name].shape) == shape, (name, weights[name].shape, shape)
    weights = {name: w.float() for name, w in weights.items()}
    tokens = torch.from_numpy(np.fromfile(os.path.join(case, "tokens.bin"), dtype=np.int32)
                              .astype(np.int64)).view(c["batch"], c["seq_len"])
    logits = logits_of(family, config, weights, tokens, case)
    logits.numpy().astype(np.float32).tofile(os.path.join(case, "hf_logits.bin"))
    titan = torch.from_numpy(np.fromfile(os.path.join(case, "titan_logits.bin"), dtype=np.float32))
    error = relative_error(titan.view_as(logits), logits)
    print(f"{os.path.basename(case)}: {len(weights)} tensors, logits relative error {error:.3g}")
    made, tensors = family.made(config, c, seed=2024)
    write_made(family, case, made, tensors, tokens)
    return error <= TOLERANCE


def main(family, usage):
    if len(sys.argv) < 2:
        sys.exit(usage)
    results = [run_case(family, case) for case in sys.argv[1:]]
    sys.exit(0 if all(results) else 1)
