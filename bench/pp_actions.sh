#!/usr/bin/env bash
# Where one schedule's step time goes at pp = PP on the debug recipe (as bench/pp_bubble.sh runs
# it): profiles steps 2, 4 and 6 and prints, from steps 4 and 6, each stage's mean F, B, I and W
# (with the GEMMs and copies inside) and each rank's idle time with the actions it waited before
# (bench/pp_actions.py). Profiling adds a little time to every kernel. Further arguments go to
# titan-run.
# Usage: bench/pp_actions.sh [build-dir] [PP] [SCHEDULE] [titan-run flags...]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
pp=${2:-2}
schedule=${3:-InterleavedZeroBubble}
shift $(($# < 3 ? $# : 3))
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
grep -m1 'model name' /proc/cpuinfo
grep -m1 '^flags' /proc/cpuinfo
echo "$schedule at pp $pp, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)${*:+, flags: $*}"
OMP_NUM_THREADS=1 mpirun --oversubscribe --allow-run-as-root -np "$pp" "$build/bin/titan-run" \
  --recipe "$root/recipes/llama3_debug.toml" --training.steps=6 --metrics.log_freq=1 \
  --training.local_batch_size=8 --training.global_batch_size=8 \
  --parallelism.pipeline_parallel_degree="$pp" --parallelism.pipeline_parallel_schedule="$schedule" \
  --activation_checkpoint.mode=none --generate.max_new_tokens=0 --validation.freq=0 \
  --profiling.enable_profiling=true --profiling.profile_freq=2 \
  --job.dump_folder="$out/run" "$@" >"$out/run.log" 2>&1 || { cat "$out/run.log"; exit 1; }
/usr/bin/python3 "$root/bench/pp_actions.py" "$out/run/profile_trace/iteration_4" \
  "$out/run/profile_trace/iteration_6"
