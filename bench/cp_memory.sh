#!/usr/bin/env bash
# Per-rank memory and step time of the debug model at a long sequence (2048 tokens) under
# context parallelism, cp = 1, 2 and 4 with each rotate method (allgather, alltoall: the ring),
# the same one sequence per step on every cp rank, no activation checkpointing, one OpenMP
# thread per rank: rank 0's peak resident memory and the step time.
# Usage: bench/cp_memory.sh [build-dir] [seq-len]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
seq_len=${2:-2048}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| cp | rotate method | seq_len | rank 0 peak RSS (GiB) | step time (s) |"
echo "|---:|---|---:|---:|---:|"
for run in 1:- 2:allgather 2:alltoall 4:allgather 4:alltoall; do
  cp=${run%%:*} method=${run#*:}
  name=cp$cp-$method
  launch=() rotate=()
  [ "$method" != - ] && rotate=(--parallelism.context_parallel_rotate_method="$method")
  [ "$cp" -gt 1 ] && launch=(mpirun --oversubscribe --allow-run-as-root -np "$cp")
  OMP_NUM_THREADS=1 "${launch[@]}" "$build/bin/titan-run" \
    --recipe "$root/recipes/llama3_debug.toml" --training.steps=4 --metrics.log_freq=1 \
    --training.seq_len="$seq_len" --training.local_batch_size=1 \
    --parallelism.context_parallel_degree="$cp" --parallelism.data_parallel_shard_degree=1 \
    "${rotate[@]}" \
    --activation_checkpoint.mode=none --generate.max_new_tokens=0 --validation.freq=0 \
    --job.dump_folder="$out/$name" >"$out/$name.log" 2>&1 || { cat "$out/$name.log"; exit 1; }
  /usr/bin/python3 - "$out/$name/metrics.jsonl" "$cp" "$seq_len" "$method" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][1:]  # step 1 warms up
cp, seq_len, method = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
# tps is each rank's share: the step's seq_len tokens over the cp ranks.
step_s = sum(seq_len / (r["tps"] * cp) for r in rows) / len(rows)
print(f"| {cp} | {method} | {seq_len} | {max(r['mem_gib'] for r in rows):.3f} | {step_s:.2f} |")
PY
done
