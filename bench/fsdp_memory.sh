#!/usr/bin/env bash
# Per-rank memory of the debug recipe under fsdp on N = 1, 2 and 4 ranks (the same global batch
# of 4): the parameters, gradients and optimizer state each rank keeps, and rank 0's peak
# resident memory, with the step time. Usage: bench/fsdp_memory.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| ranks | local batch | params + grads + AdamW state per rank (MiB) | rank 0 peak RSS (GiB) | step time (s) |"
echo "|---:|---:|---:|---:|---:|"
for ranks in 1 2 4; do
  launch=()
  [ "$ranks" -gt 1 ] && launch=(mpirun --oversubscribe --allow-run-as-root -np "$ranks")
  OMP_NUM_THREADS=$((ranks > 2 ? 1 : 2 / ranks)) "${launch[@]}" "$build/bin/titan-run" \
    --recipe "$root/recipes/llama3_debug.toml" --training.steps=6 --training.local_batch_size=$((4 / ranks)) \
    --generate.max_new_tokens=0 --validation.freq=0 --job.dump_folder="$out/$ranks" >"$out/$ranks.log" 2>&1
  state=$(grep -m1 -o "optimizer state: [0-9.]* MiB" "$out/$ranks.log" | grep -o "[0-9.]*")
  /usr/bin/python3 - "$out/$ranks/metrics.jsonl" "$ranks" "$((4 / ranks))" "$state" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
last = rows[-1]
# tokens/s is per rank: a step processes local batch x seq_len tokens on each rank.
step_s = int(sys.argv[3]) * 128 / last["tps"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {float(sys.argv[4]):.1f} | {last['mem_gib']:.2f} | {step_s:.2f} |")
PY
done
