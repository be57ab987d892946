#!/usr/bin/env bash
# Installs titan from BUILD_DIR into a temporary prefix, builds the SDK example plugin against
# the installed SDK (and against the build tree), and checks the installed titan-run loads it.
set -euo pipefail
build_dir=$1 example_dir=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build_dir" --prefix "$prefix" >"$work/install.log"
[ -x "$prefix/bin/titan-run" ] || fail "titan-run was not installed"
[ -f "$prefix/include/titan/plugin.h" ] || fail "SDK headers were not installed"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$example_dir" -B "$work/example" "${generator[@]}" -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/configure.log" || { cat "$work/configure.log"; fail "example did not configure"; }
cmake --build "$work/example" >"$work/build.log" || { cat "$work/build.log"; fail "example did not build"; }
plugin=$work/example/titan_optimizer_lion.so
[ -f "$plugin" ] || fail "no $plugin"

# The installed titan-run finds its own plugins in the prefix, not the build tree.
list=$(env -u TITAN_PLUGIN_PATH "$prefix/bin/titan-run" --plugin-dir "$work/example" --list-plugins)
echo "$list"
abi=$(sed -n 's/^#define TITAN_ABI_VERSION \([0-9]*\)$/\1/p' "$prefix/include/titan/abi.h")
grep -Eq "^optimizer +lion +0\.1\.0 +$abi +$plugin\$" <<<"$list" || fail "lion not listed"
grep -q "Lion: sign of interpolated momentum" <<<"$list" || fail "lion summary not listed"
grep -q "$prefix/lib/titan/plugins/titan_optimizer_adamw.so" <<<"$list" || fail "adamw not found in the prefix"
[ -f "$prefix/share/titan/recipes/llama3_debug.toml" ] || fail "recipes were not installed"
if grep -q "$build_dir/lib/titan/plugins" <<<"$list"; then fail "installed titan-run loaded plugins from the build tree"; fi

# Every installed tool has its man page, made from its --help when help2man was found.
if grep -q "^TITAN_HELP2MAN:FILEPATH=.*NOTFOUND" "$build_dir/CMakeCache.txt" ||
   grep -q "^TITAN_MAN_PAGES:STRING=OFF" "$build_dir/CMakeCache.txt"; then
  echo "no man pages to check: the build was configured without help2man"
else
  for tool in "$prefix"/bin/titan-*; do
    [ -f "$prefix/share/man/man1/$(basename "$tool").1" ] || fail "no man page for $(basename "$tool")"
  done
  page=$(MANPATH="$prefix/share/man" MANPAGER=cat MANWIDTH=100 man titan-run 2>&1) ||
    fail "man titan-run: $page"
  grep -q -- "--list-plugins" <<<"$page" || fail "man titan-run lacks --list-plugins: $page"
  grep -q "SLURM_LOCALID" <<<"$page" || fail "man titan-run lacks the launchers' variables"
fi

# A recipe selecting the plugin validates, with the plugin checking its own keys.
recipe=$work/lion.toml
# --validate reads the dataset: it must hold the windows of one step (2 x 17 tokens).
for i in $(seq 20); do echo "a small corpus, line $i of it"; done >"$work/corpus.txt"
printf '[model]\nflavor = "debugmodel"\n\n[optimizer]\nname = "lion"\nlr = 3e-5\n\n[training]\ndataset_path = "%s"\nseq_len = 16\nlocal_batch_size = 2\n' \
  "$work/corpus.txt" >"$recipe"
out=$(env -u TITAN_PLUGIN_PATH "$prefix/bin/titan-run" --plugin-dir "$work/example" \
  --recipe "$recipe" --validate 2>&1)
echo "$out"
grep -q "uses optimizer plugin 'lion' 0.1.0" <<<"$out" || fail "recipe did not use lion"
if env -u TITAN_PLUGIN_PATH "$prefix/bin/titan-run" --plugin-dir "$work/example" \
  --recipe "$recipe" --optimizer.beta1=2 --validate >"$work/bad.log" 2>&1; then
  fail "lion accepted beta1 = 2"
fi
grep -q "optimizer.beta1: 2.0 is out of range: the most allowed is 1.0" "$work/bad.log" || { cat "$work/bad.log"; fail "no range error"; }

# find_package(TitanSDK) also works straight from the build tree.
cmake -S "$example_dir" -B "$work/example-buildtree" "${generator[@]}" \
  -DCMAKE_PREFIX_PATH="$build_dir" >"$work/configure-buildtree.log" || fail "build-tree SDK not found"
cmake --build "$work/example-buildtree" >/dev/null || fail "example did not build against the build tree"
[ -f "$work/example-buildtree/titan_optimizer_lion.so" ] || fail "no build-tree plugin"
echo "install test passed"
