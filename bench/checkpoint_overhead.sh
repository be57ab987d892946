#!/usr/bin/env bash
# Training time of the debug recipe (20 steps) without checkpoints, with a synchronous dcp save
# every 2 steps, and with the same saves in the background (async_mode = "async"), in one run.
# Usage: bench/checkpoint_overhead.sh [build-dir]
set -eu  # no pipefail: a run without saves greps nothing
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
run() {  # name, extra flags...
  local name=$1
  shift
  "$build/bin/titan-run" --recipe "$root/recipes/llama3_debug.toml" --training.steps=20 \
    --generate.max_new_tokens=0 --validation.freq=0 --job.dump_folder="$out/$name" "$@" \
    >"$out/$name.log" 2>&1
  local seconds saves save_s
  seconds=$(grep -o "done: 20 steps in [0-9.]*s" "$out/$name.log" | grep -o "[0-9.]*s$" | tr -d s)
  saves=$(grep -c "\[checkpoint\] saved" "$out/$name.log" || true)
  save_s=$(grep -o "saved .* in [0-9.]*s" "$out/$name.log" | grep -o "[0-9.]*s$" |
           tr -d s | awk '{s += $1} END {printf "%.2f", NR ? s / NR : 0}')
  # What the step loop waited for: the whole save, or only the snapshot when async.
  pause_s=$(grep -o "paused [0-9.]*s for the snapshot" "$out/$name.log" | grep -o "[0-9.]*" |
            awk '{s += $1} END {printf "%.2f", NR ? s / NR : 0}')
  [ "$name" = sync ] && pause_s=$save_s
  echo "| $name | $seconds | $saves | $save_s | $pause_s |"
}
echo "| checkpointing | 20 steps (s) | saves | mean save (s) | mean pause of training per save (s) |"
echo "|---|---:|---:|---:|---:|"
run none
run sync --checkpoint.enable=true --checkpoint.interval=2 --checkpoint.last_save_model_only=false
run async --checkpoint.enable=true --checkpoint.interval=2 --checkpoint.last_save_model_only=false \
  --checkpoint.async_mode=async
