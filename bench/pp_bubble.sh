#!/usr/bin/env bash
# Step time and pipeline bubble of every schedule at pp = PP (default 4) on the debug recipe (6
# blocks, so 8 units of work with the embedding and output: one per stage of the
# 2-stage-per-rank schedules at pp 4), 8 microbatches of one sequence per step, no activation
# checkpointing, one OpenMP thread per rank. The measured bubble is the pp ranks' idle share of
# the schedule's wall time (from metrics.jsonl, steps 2..6), next to the schedule's theoretical
# one (F = 1, B = 2, I = W = 1, communication free). With more ranks than cores the ranks also
# wait for a core, which the measured figure counts as idle. Further arguments go to titan-run
# (e.g. the stage split's --parallelism.pipeline_parallel_first_stage_less_layers=0). On a shared
# machine ROUNDS=N runs each schedule N times and reports its fastest run.
# Usage: [ROUNDS=N] bench/pp_bubble.sh [build-dir] [PP] [titan-run flags...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
pp=${2:-4}
shift $(($# < 2 ? $# : 2))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
grep -m1 'model name' /proc/cpuinfo
grep -m1 '^flags' /proc/cpuinfo
rounds=${ROUNDS:-1}
echo "pp $pp, $(nproc) cores, fastest of $rounds run(s) each, load average $(cut -d' ' -f1-3 /proc/loadavg)${*:+, flags: $*}"
echo "| schedule | step time (s) | measured bubble | theoretical bubble |"
echo "|---|---:|---:|---:|"
for schedule in GPipe 1F1B Interleaved1F1B LoopedBFS InterleavedZeroBubble ZBVZeroBubble \
  DualPipeV; do
  for round in $(seq "$rounds"); do
    OMP_NUM_THREADS=1 mpirun --oversubscribe --allow-run-as-root -np "$pp" "$build/bin/titan-run" \
      --recipe "$root/recipes/llama3_debug.toml" --training.steps=6 --metrics.log_freq=1 \
      --training.local_batch_size=8 --training.global_batch_size=8 \
      --parallelism.pipeline_parallel_degree="$pp" --parallelism.pipeline_parallel_schedule="$schedule" \
      --activation_checkpoint.mode=none --generate.max_new_tokens=0 --validation.freq=0 \
      --job.dump_folder="$out/$schedule.$round" "$@" >"$out/$schedule.log" 2>&1 ||
      { cat "$out/$schedule.log"; exit 1; }
  done
  /usr/bin/python3 - "$schedule" "$out/$schedule".*/metrics.jsonl <<'PY'
import json, sys
runs = []
for path in sys.argv[2:]:
    rows = [json.loads(l) for l in open(path) if '"loss"' in l][1:]  # step 1 warms up
    step_s = sum(8 * 128 / r["tps"] for r in rows) / len(rows)
    bubble = sum(r["pp_bubble"] for r in rows) / len(rows)
    runs.append((step_s, bubble, rows[-1]["pp_bubble_schedule"]))
step_s, bubble, theory = min(runs)
print(f"| {sys.argv[1]} | {step_s:.2f} | {100 * bubble:.1f}% | {100 * theory:.1f}% |")
PY
done
