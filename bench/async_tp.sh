#!/usr/bin/env bash
# Async tensor parallelism's step time against the synchronous collectives on the CPU (MPI), at
# tp 2 and tp 4: the debug recipe with long sequences (seq_len 1024, batch 4, so each matmul has
# 4096 rows), 8 steps, profiling every step so the metrics carry the rings' hidden and exposed
# communication (tp_comm_hidden_s, tp_comm_exposed_s; 0 for the synchronous runs, whose
# collectives are all exposed). Prints a Markdown table: the median step time of steps 3 to 8.
# Usage: bench/async_tp.sh [build-dir]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "| tp | async | step time (s) | tp communication hidden per step (ms) | exposed per step (ms) |"
echo "|---:|---|---:|---:|---:|"
for tp in 2 4; do
  for async in false true; do
    name=tp${tp}_$async
    OMP_NUM_THREADS=1 mpirun --oversubscribe --allow-run-as-root -np "$tp" \
      "$build/bin/titan-run" --recipe "$root/recipes/llama3_debug.toml" --training.steps=8 \
      --training.seq_len=1024 --training.local_batch_size=4 --metrics.log_freq=1 \
      --parallelism.tensor_parallel_degree="$tp" \
      --parallelism.enable_async_tensor_parallel="$async" \
      --profiling.enable_profiling=true --profiling.profile_freq=1000 \
      --generate.max_new_tokens=0 --validation.freq=0 --job.dump_folder="$out/$name" \
      >"$out/$name.log" 2>&1
    /usr/bin/python3 - "$out/$name/metrics.jsonl" "$tp" "$async" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l][2:]
# tokens/s counts one data-parallel rank's tokens: local batch x seq_len per step.
step = statistics.median(4 * 1024 / r["tps"] for r in rows)
hidden = statistics.median(r.get("tp_comm_hidden_s", 0) for r in rows) * 1e3
exposed = statistics.median(r.get("tp_comm_exposed_s", 0) for r in rows) * 1e3
print(f"| {sys.argv[2]} | {sys.argv[3]} | {step:.3f} | {hidden:.1f} | {exposed:.1f} |")
PY
  done
done
