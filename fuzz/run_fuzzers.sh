#!/usr/bin/env bash
# Runs every fuzz target under libFuzzer for a bounded time; fails on any crash, sanitizer report
# or broken property, leaving the input that caused it in the build folder.
#
#   fuzz/run_fuzzers.sh [TARGET...]          e.g. fuzz/run_fuzzers.sh recipe_fuzz
#
# Builds the targets with clang, AddressSanitizer and UBSan in build-fuzz/ (TITAN_FUZZ_BUILD_DIR
# overrides), with ccache when there is one. Each target starts from fuzz/corpus/<target>/ and
# runs TITAN_FUZZ_SECONDS seconds (default 15) from a random seed; what it learns goes to
# build-fuzz/corpus/, never into the repository. With TITAN_FUZZ_RUNS set, each target instead
# runs that many inputs from seed TITAN_FUZZ_SEED (default 1) and the repository's corpus alone:
# the same inputs on every machine, however fast, which is how the test suite runs it. See
# docs/fuzzing.md for turning a finding into a regression input.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${TITAN_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=${TITAN_FUZZ_SECONDS:-15}

# Cache hits across clones and worktrees: paths relative to the checkout, and the build folder
# left out of the hash (a cached object's debug info may then name another checkout's folder).
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$root} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
if [ ! -f "$build_dir/build.ninja" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # OSS-Fuzz's optimization and debug level: line tables suffice for the reports, and compile
  # in about half the time of -O2 -g.
  cmake -S "$root" -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -gline-tables-only -DNDEBUG" \
    -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 -DTITAN_CUDA=OFF \
    -DTITAN_SANITIZE=ON -DTITAN_FUZZ=ON "${launcher[@]}" >/dev/null
fi
cmake --build "$build_dir" --target titan_fuzz_targets -j "$(nproc)"

targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(cd "$root/fuzz" && ls ./*_fuzz.cc | sed 's|^\./||; s|\.cc$||')
fi
mkdir -p "$build_dir/findings"
# Most targets hand their input to a parser as a file: in memory that is ten times faster.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
failed=()
for target in "${targets[@]}"; do
  log=$build_dir/findings/$target.log
  if [ -n "${TITAN_FUZZ_RUNS:-}" ]; then
    # What the run learns goes to a fresh folder, so the next run starts from the same corpus.
    learned=$build_dir/corpus-reproducible/$target
    rm -rf "$learned"
    budget=(-runs="$TITAN_FUZZ_RUNS" -seed="${TITAN_FUZZ_SEED:-1}")
    echo "== $target: $TITAN_FUZZ_RUNS inputs from seed ${TITAN_FUZZ_SEED:-1}"
  else
    learned=$build_dir/corpus/$target
    budget=(-max_total_time="$seconds")
    echo "== $target: ${seconds}s"
  fi
  mkdir -p "$learned"
  # An input slower than a minute is a finding; the limit is generous so that a loaded machine
  # never trips it. Leaks are findings too (LeakSanitizer, at exit and after suspect inputs).
  if "$build_dir/bin/$target" "${budget[@]}" \
      -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$build_dir/findings/$target-" \
      "$learned" "$root/fuzz/corpus/$target" >"$log" 2>&1; then
    grep -E '^stat::number_of_executed_units|^Done' "$log" | tr '\n' ' '
    echo
  else
    failed+=("$target")
    tail -n 40 "$log"
    echo "== $target FAILED: the input is $(ls -t "$build_dir/findings/$target"-* 2>/dev/null |
      grep -v '\.log$' | head -n 1); log: $log"
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz findings in: ${failed[*]} (docs/fuzzing.md: fix the parser, add the input to the corpus)"
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, no finding"
