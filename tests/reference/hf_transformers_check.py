"""titan's Hugging Face interop against transformers itself, not a re-implementation of it. Run by
the python of bench/torch-venv (PyPI's torch with the transformers it pins) on the case folders
the hf_*_reference_test.cc tests write and their reference script fills.

Usage: VENV_PYTHON hf_transformers_check.py CASE_DIR [CASE_DIR ...]

In each CASE_DIR (see hf_llama_reference.py for the files), every model folder there is loads
into transformers' AutoModelForCausalLM in f32 with no missing, unexpected or mismatched tensor
and no warning from transformers, and its logits for tokens.bin match the logits titan gave
for the same model within 1e-5 (relative norm):
  export/      titan's export                           against titan_logits.bin
  hf_written/  titan's model in Meta-converted layout   against titan_logits.bin
  hf_made/     a model made in transformers' layout     against hf_made_logits.bin, which titan,
               importing hf_made/, reproduces in the C++ test
Then transformers saves the last model it loaded there (hf_made/ or hf_written/ where there is
one) with save_pretrained into tf_saved/, as transformers 5 writes a folder (its config keys, such as
rope_parameters and num_local_experts), and writes its logits to tf_saved_logits.bin, for the
C++ test to import and reproduce.
A bf16 export (case.txt's f32_export) is left out: the reference compares it with its f32 export.
"""
import logging
import os
import sys

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_llama_reference import TOLERANCE, read_case, relative_error  # noqa: E402

# (model folder, the logits file its logits must match)
FOLDERS = [("export", "titan_logits.bin"), ("hf_written", "titan_logits.bin"),
           ("hf_made", "hf_made_logits.bin")]


class Warnings(logging.Handler):
    """Every warning transformers logs while a folder loads and runs."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def check_folder(folder, tokens, batch, seq_len, expected_path):
    warnings = Warnings()
    logger = logging.getLogger("transformers")
    logger.addHandler(warnings)
    try:
        model, info = transformers.AutoModelForCausalLM.from_pretrained(
            folder, dtype=torch.float32, output_loading_info=True, attn_implementation="eager")
        with torch.no_grad():
            ids = torch.tensor(tokens, dtype=torch.long).reshape(batch, seq_len)
            logits = model(input_ids=ids).logits.reshape(batch * seq_len, -1).numpy()
    finally:
        logger.removeHandler(warnings)
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        assert not info.get(kind), f"{folder}: transformers reports {kind}: {info[kind]}"
    assert not warnings.messages, f"{folder}: transformers warned: {warnings.messages}"
    expected = np.fromfile(expected_path, dtype=np.float32).reshape(logits.shape)
    error = relative_error(torch.from_numpy(logits), torch.from_numpy(expected))
    name = f"{os.path.basename(os.path.dirname(folder))}/{os.path.basename(folder)}"
    print(f"{name}: {type(model).__name__} loads with nothing missing or unexpected; logits "
          f"relative error {error:.3g} against {os.path.basename(expected_path)}")
    assert error <= TOLERANCE, f"{folder}: logits differ by {error:.3g} > {TOLERANCE}"
    return model, logits


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    transformers.logging.set_verbosity_warning()
    transformers.logging.disable_progress_bar()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    checked = 0
    for case in sys.argv[1:]:
        meta = read_case(case)
        if "f32_export" in meta:
            continue
        tokens = np.fromfile(os.path.join(case, "tokens.bin"), dtype=np.int32)
        batch, seq_len = int(meta["batch"]), int(meta["seq_len"])
        loaded = None
        for folder, expected in FOLDERS:
            if os.path.isdir(os.path.join(case, folder)):
                loaded = check_folder(os.path.join(case, folder), tokens, batch, seq_len,
                                      os.path.join(case, expected))
                checked += 1
        if loaded is not None:
            model, logits = loaded
            model.save_pretrained(os.path.join(case, "tf_saved"))
            logits.astype(np.float32).tofile(os.path.join(case, "tf_saved_logits.bin"))
    assert checked > 0, "no model folder to check"


if __name__ == "__main__":
    main()
