#!/usr/bin/env bash
# The GPU bundle is self-contained: tools/gpu-bundle packs the suite's build, the archive is
# unpacked with the root's own tar into a clean Debian 12 root (debootstrap minbase: none of
# titan's build or run dependencies, no Python), and there titan-run loads every plugin, the
# bundle's launcher runs two ranks, and tools/gpu-check --bundle trains the debug recipe on the
# CPU against the bundled reference and ends with the "no device" verdict (exit 3).
#   gpu_bundle_test.sh BUILD_DIR WORK
# The root is cached between runs outside the clone, as the apt_install test's is.
set -euo pipefail
build_dir=$1 work=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/support/debian_root.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root for debootstrap and chroot (run the test as root)"

rm -rf "$work"
mkdir -p "$work"
"$here/../tools/gpu-bundle" --build-dir "$build_dir" --out "$work/out" >"$work/bundle.log" 2>&1 ||
  { tail -30 "$work/bundle.log"; fail "tools/gpu-bundle"; }
cat "$work/bundle.log"
archive=$work/out/titan-gpu-bundle.tar.gz
[ "$(stat -c %s "$archive")" -le $((48 * 1048576)) ] || fail "the archive is over 48 MiB"

base=$(cached_debian_root "$work.root.log")
root=$work/root
cp -a "$base" "$root"
for absent in /usr/bin/python3 /usr/bin/mpirun /usr/lib/x86_64-linux-gnu/libopenblas.so.0 \
    /usr/lib/x86_64-linux-gnu/libabsl_strings.so.20220623 /usr/lib/x86_64-linux-gnu/libgomp.so.1; do
  [ ! -e "$root$absent" ] || fail "the clean root has $absent: it would hide a missing library"
done
cp "$archive" "$root/tmp/"
in_root "$root" tar -xzf /tmp/titan-gpu-bundle.tar.gz -C /opt || fail "unpacking with the root's tar"
mkdir -p "$root/opt/tools"
cp "$here/../tools/gpu-check" "$root/opt/tools/"
bundle=/opt/titan-gpu-bundle

# Every plugin of the bundle loads, none is rejected.
list=$(in_root "$root" $bundle/bin/titan-run --list-plugins 2>&1) || { echo "$list"; fail "--list-plugins"; }
for plugin in "$root$bundle"/lib/titan/plugins/titan_*.so; do
  grep -q "$bundle/lib/titan/plugins/$(basename "$plugin")\$" <<<"$list" ||
    { echo "$list"; fail "titan-run --list-plugins lacks $(basename "$plugin")"; }
done
! grep -qi "skipping plugin" <<<"$list" || { echo "$list"; fail "a plugin was rejected"; }

# The bundle's launcher: two ranks under fsdp 2 through the mpi plugin, on the CPU.
in_root "$root" sh -c "cd /tmp && $bundle/bin/mpirun --oversubscribe --allow-run-as-root -np 2 \
  $bundle/bin/titan-run --recipe $bundle/recipes/llama3_debug.toml \
  --training.dataset_path=$bundle/data/fortunes --training.steps=2 --generate.max_new_tokens=0 \
  --validation.freq=1000 --comm.backend=mpi" >"$work/mpirun.log" 2>&1 ||
  { tail -30 "$work/mpirun.log"; fail "two ranks through the bundle's mpirun"; }
grep -q "done: 2 steps" "$work/mpirun.log" || { cat "$work/mpirun.log"; fail "no 'done: 2 steps'"; }

# The proof itself: the bundle part passes, then "no device".
status=0
in_root "$root" /opt/tools/gpu-check --bundle $bundle --report /tmp/report.json \
  >"$work/gpu-check.log" 2>&1 || status=$?
cat "$work/gpu-check.log"
[ $status = 3 ] || fail "gpu-check exited $status, expected 3 (no device)"
grep -q "verdict: no device" "$work/gpu-check.log" || fail "no 'verdict: no device' printed"
report=$root/tmp/report.json
grep -q '"verdict": "no device"' "$report" || { cat "$report"; fail "the report's verdict"; }
grep -Eq '^ +bundle +pass ' "$work/gpu-check.log" || fail "the bundle part did not pass"
grep -Eq '"worst_relative_difference": [0-9.e-]+' "$report" ||
  { cat "$report"; fail "the report compares no losses with the reference"; }
[ -f "$root/tmp/report.log" ] || fail "no log beside the report"
rm -rf "$root"
echo "gpu bundle test passed"
