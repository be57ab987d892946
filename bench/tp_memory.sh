#!/usr/bin/env bash
# Per-rank memory and step time of the debug recipe under tensor parallelism on tp = 1, 2 and 4
# ranks (the same batch of 4 sequences on every tp rank), and fsdp 2 x tp 2: the parameters,
# gradients and optimizer state each rank keeps, rank 0's planned activations and peak resident
# memory, with the step time. Usage: bench/tp_memory.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| layout | ranks | local batch | params + grads + AdamW state per rank (MiB) | rank 0 peak RSS (GiB) | step time (s) |"
echo "|---|---:|---:|---:|---:|---:|"
# name ranks tp local-batch
for layout in "tp1 1 1 4" "tp2 2 2 4" "tp4 4 4 4" "fsdp2_tp2 4 2 2"; do
  read -r name ranks tp batch <<<"$layout"
  launch=()
  [ "$ranks" -gt 1 ] && launch=(mpirun --oversubscribe --allow-run-as-root -np "$ranks")
  OMP_NUM_THREADS=$((ranks > 2 ? 1 : 2 / ranks)) "${launch[@]}" "$build/bin/titan-run" \
    --recipe "$root/recipes/llama3_debug.toml" --training.steps=6 \
    --training.local_batch_size="$batch" --parallelism.tensor_parallel_degree="$tp" \
    --generate.max_new_tokens=0 --validation.freq=0 --job.dump_folder="$out/$name" \
    >"$out/$name.log" 2>&1
  state=$(grep -m1 -o "optimizer state: [0-9.]* MiB" "$out/$name.log" | grep -o "[0-9.]*")
  /usr/bin/python3 - "$out/$name/metrics.jsonl" "$name" "$ranks" "$batch" "$state" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
last = rows[-1]
# tokens/s counts the tokens of a data-parallel rank's batch: local batch x seq_len per step.
step_s = int(sys.argv[4]) * 128 / last["tps"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {float(sys.argv[5]):.1f} | "
      f"{last['mem_gib']:.2f} | {step_s:.2f} |")
PY
done
