#!/bin/bash
# Float8 training throughput on the CPU before and after a change, in one run: titan-run built
# from the commit REF (in tests/same_numbers.py's worktree and build folder, build-same-numbers/)
# and from the current build (build/), run in turns so that both see the same machine.
#
#   bench/float8_before_after.sh REF [ROUNDS]
#
# Each round trains recipes/llama3_debug.toml for 15 steps (no generation, no validation) with
# each binary in f32 and in the three Float8 recipes (--model.converters=float8
# --float8.recipe_name=tensorwise, rowwise, rowwise_with_gw_hp); a run's figure is the median of
# the tokens/s its steps 3 to 15 log. Prints each round and the medians as a Markdown table, with
# the CPU model, its vector flags and the 1-minute load average before and after.
set -euo pipefail
ref=${1:?usage: bench/float8_before_after.sh REF [ROUNDS]}
rounds=${2:-3}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$root/build-same-numbers
current=$root/build/bin/titan-run
[[ -x $current ]] || { echo "float8_before_after.sh: no $current; build the current tree first" >&2; exit 2; }

# REF's titan-run and plugins, through the same worktree and ccache flags as same_numbers.py.
/usr/bin/python3 - "$root" "$ref" "$work" <<'PY'
import sys
sys.path.insert(0, sys.argv[1] + "/tests")
import same_numbers
same_numbers.build_baseline(sys.argv[2], sys.argv[3])
PY
before=$work/build/bin/titan-run
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
tokens() {  # binary, recipe ("f32" for none) -> the median tokens/s of steps 3 to 15
  local float8=()
  [[ $2 == f32 ]] || float8=(--model.converters=float8 "--float8.recipe_name=$2")
  (cd "$root" && "$1" --recipe recipes/llama3_debug.toml --training.steps=15 \
      --generate.max_new_tokens=0 --validation.freq=0 --job.dump_folder="$out" "${float8[@]}") 2>&1 |
    awk '/\] loss / {for (i = 1; i < NF; ++i) if ($i == "step") step = $(i + 1) + 0;
                      for (i = 1; i < NF; ++i) if ($i == "tps" && step >= 3) print $(i + 1)}' |
    median
}

recipes=(f32 tensorwise rowwise rowwise_with_gw_hp)
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores;" \
     "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|amx|fma)' | xargs)"
echo "load before: $(cut -d' ' -f1 /proc/loadavg)"
echo
header="| round |" rule="|---|"
for recipe in "${recipes[@]}"; do header+=" $recipe before | $recipe after |"; rule+="---|---|"; done
echo "$header"
echo "$rule"
declare -A all
for ((r = 1; r <= rounds; ++r)); do
  line="| $r |"
  for recipe in "${recipes[@]}"; do
    b=$(tokens "$before" "$recipe") a=$(tokens "$current" "$recipe")
    all[$recipe.before]+="$b " all[$recipe.after]+="$a "
    line+=" $b | $a |"
  done
  echo "$line"
done
line="| median |"
for recipe in "${recipes[@]}"; do
  line+=" $(tr ' ' '\n' <<<"${all[$recipe.before]}" | grep . | median) |"
  line+=" $(tr ' ' '\n' <<<"${all[$recipe.after]}" | grep . | median) |"
done
echo "$line"
echo
echo "load after: $(cut -d' ' -f1 /proc/loadavg); before: $(git -C "$root" rev-parse --short "$ref"), after: the build of $(git -C "$root" rev-parse --short HEAD) plus its working tree"
