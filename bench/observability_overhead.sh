#!/usr/bin/env bash
# Step time with observability off (no TensorBoard, profiler or memory snapshot: the default)
# against a build without it: titan_train_bench of two builds, run in turns so that both see the
# same load, ROUNDS times each; prints every run's step time and the medians.
#
#   bench/observability_overhead.sh BASE_BUILD NEW_BUILD [ROUNDS] [titan_train_bench flags...]
set -euo pipefail
base=${1:?usage: $0 BASE_BUILD NEW_BUILD [ROUNDS] [flags...]}
new=${2:?usage: $0 BASE_BUILD NEW_BUILD [ROUNDS] [flags...]}
rounds=${3:-7}
shift $(($# < 3 ? $# : 3))
for build in "$base" "$new"; do
  [ -x "$build/bin/titan_train_bench" ] || {
    echo "$build/bin/titan_train_bench not found: cmake --build $build --target titan_train_bench" >&2
    exit 2
  }
done
step_s() { "$1/bin/titan_train_bench" "${@:2}" 2>/dev/null | awk '{print $2}'; }
base_times=() new_times=()
for ((i = 1; i <= rounds; i++)); do
  b=$(step_s "$base" "$@")
  n=$(step_s "$new" "$@")
  base_times+=("$b") new_times+=("$n")
  echo "round $i: base ${b}s new ${n}s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
mb=$(median "${base_times[@]}")
mn=$(median "${new_times[@]}")
echo "median step_s: base $mb new $mn ratio $(awk -v a="$mn" -v b="$mb" 'BEGIN {printf "%.4f", a / b}')"
