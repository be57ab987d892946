#!/bin/bash
# Training throughput before and after a change, in one run: titan_train_bench built from the
# commit REF (in tests/same_numbers.py's worktree and build folder, build-same-numbers/) and from
# the current build (build/), run in turns so that both see the same machine.
#
#   bench/before_after.sh REF [ROUNDS] [-- titan_train_bench flags]
#
# Each round runs the two binaries one after the other, in f32 and in bf16 (matmul operands in
# bf16), OMP_NUM_THREADS=2, the debugmodel at seq_len 256, batch 8 unless flags say otherwise.
# Prints each round's tokens/s and the median of each column as a Markdown table, with the CPU
# model and the 1-minute load average before and after.
set -euo pipefail
ref=${1:?usage: bench/before_after.sh REF [ROUNDS] [-- titan_train_bench flags]}
rounds=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
[[ ${1:-} == -- ]] && shift
root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/build-same-numbers
current=$root/build/bin/titan_train_bench
[[ -x $current ]] || { echo "before_after.sh: no $current; build the current tree first" >&2; exit 2; }

# REF's benchmark, through the same worktree and ccache flags as same_numbers.py.
/usr/bin/python3 - "$root" "$ref" "$work" <<'PY'
import sys
sys.path.insert(0, sys.argv[1] + "/tests")
import same_numbers
same_numbers.build_baseline(sys.argv[2], sys.argv[3])
PY
CCACHE_BASEDIR=$work/source CCACHE_NOHASHDIR=true \
  cmake --build "$work/build" -j 2 --target titan_train_bench titan_optimizer_adamw >/dev/null
before=$work/build/bin/titan_train_bench

tokens() {  # binary, precision flag -> tokens/s
  OMP_NUM_THREADS=2 "$1" --bf16 "$2" "${@:3}" 2>/dev/null |
    awk '{for (i = 1; i < NF; ++i) if ($i == "tokens_per_s") print $(i + 1)}'
}
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "load before: $(cut -d' ' -f1 /proc/loadavg)"
echo
echo "| round | f32 before | f32 after | bf16 before | bf16 after |"
echo "|---|---|---|---|---|"
declare -a f32b f32a bf16b bf16a
for ((r = 1; r <= rounds; ++r)); do
  f32b+=("$(tokens "$before" 0 "$@")"); f32a+=("$(tokens "$current" 0 "$@")")
  bf16b+=("$(tokens "$before" 1 "$@")"); bf16a+=("$(tokens "$current" 1 "$@")")
  echo "| $r | ${f32b[-1]} | ${f32a[-1]} | ${bf16b[-1]} | ${bf16a[-1]} |"
done
echo "| median | $(printf '%s\n' "${f32b[@]}" | median) | $(printf '%s\n' "${f32a[@]}" | median) |" \
     "$(printf '%s\n' "${bf16b[@]}" | median) | $(printf '%s\n' "${bf16a[@]}" | median) |"
echo
echo "load after: $(cut -d' ' -f1 /proc/loadavg); before: $(git -C "$root" rev-parse --short "$ref"), after: the build of $(git -C "$root" rev-parse --short HEAD) plus its working tree"
