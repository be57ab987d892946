#!/usr/bin/env bash
# Installs titan's .debs with apt into a clean Debian 12 root made by debootstrap, trains the
# packaged debug recipe there, lists the plugins, checks the man pages, builds the SDK example
# against the installed SDK and loads it, then removes the packages and checks that no file is
# left behind.
#   apt_install_test.sh DEB_DIR VERSION WORK
# The root, with the packages' dependencies installed, is cached between runs outside the clone
# (TITAN_DEBOOTSTRAP_CACHE, default /var/cache/titan/debootstrap), one per package list.
set -euo pipefail
deb_dir=$1 version=$2 work=$3
source "$(dirname "${BASH_SOURCE[0]}")/support/debian_root.sh"
fail() { echo "FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root for debootstrap and chroot (run the test as root)"

arch=$(dpkg --print-architecture)
debs=("$deb_dir/titan_${version}_$arch.deb" "$deb_dir/titan-dev_${version}_$arch.deb")
for deb in "${debs[@]}"; do [ -f "$deb" ] || fail "no $deb (the packaging.deb test builds it)"; done

# The root holds what the packages depend on (first alternatives), and what building a plugin
# needs beyond titan-dev's dependencies, so installing titan downloads nothing.
mapfile -t packages < <(
  { for deb in "${debs[@]}"; do dpkg-deb -f "$deb" Depends; done | tr ',' '\n' |
      sed -e 's/|.*//' -e 's/(.*)//' -e 's/[[:space:]]//g' | grep -v '^titan' | grep -v '^$'
    printf '%s\n' g++ make; } | sort -u)
base=$(cached_debian_root "$work.root.log" "${packages[@]}")

rm -rf "$work"
mkdir -p "$work"
root=$work/root
cp -a "$base" "$root"
# Everything a package could leave behind: the whole root but the kernel's, apt's and dpkg's
# own state, logs and /tmp, where the test works.
snapshot() {
  (cd "$root" && find . -xdev \( -path ./proc -o -path ./dev -o -path ./tmp -o -path ./var/lib/dpkg \
      -o -path ./var/lib/apt -o -path ./var/cache -o -path ./var/log -o -path ./root \) -prune \
      -o -print | sort)
}
snapshot >"$work/before.txt"

mkdir -p "$root/tmp/debs"
cp "${debs[@]}" "$root/tmp/debs/"
in_root "$root" sh -c "cd /tmp/debs && apt-get install -y -q --no-install-recommends \
  ./titan_${version}_$arch.deb ./titan-dev_${version}_$arch.deb" >"$work/install.log" 2>&1 ||
  { tail -30 "$work/install.log"; fail "apt-get install ./titan_*.deb"; }
grep -q "^0 upgraded, 2 newly installed, 0 to remove" "$work/install.log" ||
  { cat "$work/install.log"; fail "apt installed more than titan and titan-dev: the cached root lacks some"; }

# The packaged recipe trains, reading only what the packages brought.
in_root "$root" sh -c "mkdir -p /tmp/run && cd /tmp/run && titan-run \
  --recipe /usr/share/titan/recipes/llama3_debug.toml --training.steps=3" >"$work/train.log" 2>&1 ||
  { tail -30 "$work/train.log"; fail "titan-run did not train the packaged debug recipe"; }
grep -q "step 3\] loss [0-9.]*" "$work/train.log" || { cat "$work/train.log"; fail "no loss at step 3"; }
grep -q "done: 3 steps" "$work/train.log" || fail "the run did not finish its 3 steps"

# Every installed tool has its man page; titan-run's, as `man titan-run` shows it, lists its flags.
for tool in "$root"/usr/bin/titan-*; do
  [ -f "$root/usr/share/man/man1/$(basename "$tool").1.gz" ] ||
    fail "titan installs $(basename "$tool") without its man page"
done
page=$(MANPAGER=cat MANWIDTH=100 man -l "$root/usr/share/man/man1/titan-run.1.gz" 2>&1) ||
  fail "man titan-run: $page"
grep -q -- "--list-plugins" <<<"$page" || fail "man titan-run lacks --list-plugins: $page"
if in_root "$root" sh -c "command -v man" >/dev/null; then
  in_root "$root" man titan-run >/dev/null || fail "man titan-run in the root"
fi

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
list=$(in_root "$root" titan-run --list-plugins)
for plugin in optimizer_adamw comm_mpi parallel_fsdp checkpoint_dcp balance_greedy; do
  grep -q "/usr/lib/$multiarch/titan/plugins/titan_$plugin.so" <<<"$list" ||
    { echo "$list"; fail "titan-run --list-plugins lacks titan_$plugin.so"; }
done
[ "$(in_root "$root" titan-run --version)" = "titan $version (plugin ABI $(
  sed -n 's/^#define TITAN_ABI_VERSION \([0-9]*\)$/\1/p' "$root/usr/include/titan/abi.h"))" ] ||
  fail "installed titan-run --version"

# The SDK example, built with find_package(TitanSDK) from /usr, loaded by the installed titan-run.
in_root "$root" sh -c "cp -r /usr/share/doc/titan-dev/examples /tmp/lion &&
  cmake -S /tmp/lion -B /tmp/lion/build && cmake --build /tmp/lion/build" >"$work/sdk.log" 2>&1 ||
  { tail -30 "$work/sdk.log"; fail "the SDK example did not build against the installed SDK"; }
grep -q "/usr/lib/$multiarch/cmake/TitanSDK" "$root/tmp/lion/build/CMakeCache.txt" ||
  fail "the example did not find the installed TitanSDK"
list=$(in_root "$root" titan-run --plugin-dir /tmp/lion/build --list-plugins)
grep -Eq "^optimizer +lion +0\.1\.0 .*/tmp/lion/build/titan_optimizer_lion.so$" <<<"$list" ||
  { echo "$list"; fail "the installed titan-run does not list the example plugin"; }
# The debug recipe with Lion in AdamW's place (Lion has no eps).
in_root "$root" sh -c "cd /tmp/run && sed -e 's/^name = \"adamw\"/name = \"lion\"/' -e '/^eps = /d' \
  /usr/share/titan/recipes/llama3_debug.toml >lion.toml &&
  titan-run --plugin-dir /tmp/lion/build --recipe lion.toml --training.steps=2" \
  >"$work/lion.log" 2>&1 || { tail -30 "$work/lion.log"; fail "training with the example plugin"; }
grep -q "uses optimizer plugin 'lion' 0.1.0" "$work/lion.log" || fail "the run did not use lion"

# Installed into /usr, the example lands where the installed titan-run looks without flags.
in_root "$root" cmake --install /tmp/lion/build --prefix /usr >"$work/sdk-install.log" 2>&1 ||
  { cat "$work/sdk-install.log"; fail "cmake --install of the example"; }
grep -Eq "^optimizer +lion .* /usr/lib/$multiarch/titan/plugins/titan_optimizer_lion.so$" \
  <<<"$(in_root "$root" titan-run --list-plugins)" || fail "the installed example is not found"
rm "$root/usr/lib/$multiarch/titan/plugins/titan_optimizer_lion.so"

# apt-get remove leaves nothing behind (titan has no conffiles, so purge is not needed).
in_root "$root" apt-get remove -y -q titan titan-dev >"$work/remove.log" 2>&1 ||
  { cat "$work/remove.log"; fail "apt-get remove"; }
snapshot >"$work/after.txt"
diff "$work/before.txt" "$work/after.txt" >"$work/left.txt" ||
  { cat "$work/left.txt"; fail "apt-get remove left files behind (or removed others)"; }
rm -rf "$root"
echo "apt install test passed"
