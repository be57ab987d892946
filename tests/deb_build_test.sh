#!/usr/bin/env bash
# Builds titan's Debian packages from packaging/debian with `dpkg-buildpackage -b` in a copy of
# SOURCE_DIR, then checks them: the split into titan, titan-plugins-cuda (where the CUDA toolkit
# is) and titan-dev, their files, the dependencies dpkg-shlibdeps computed, the one version,
# the man pages, lintian. The .debs stay in WORK for the apt install test.
#   deb_build_test.sh SOURCE_DIR VERSION WORK
set -euo pipefail
source_dir=$1 version=$2 work=$3
fail() { echo "FAIL: $*" >&2; exit 1; }

rm -rf "$work"
tree=$work/titan-$version
mkdir -p "$tree"
# What git tracks or would track (no build folders), as a source package holds it.
git -C "$source_dir" ls-files -z --cached --others --exclude-standard |
  (cd "$source_dir" && xargs -0 cp --parents -t "$tree" 2>/dev/null || true)
[ -f "$tree/CMakeLists.txt" ] || fail "copying $source_dir to $tree"
cp -r "$source_dir/packaging/debian" "$tree/debian"

# Where debian/rules builds the CUDA package: with the toolkit, unless the nocuda profile says no.
cuda_choice() {
  make -s -C "$tree" -f debian/rules --eval 'print-cuda: ; @echo $(CUDA_FLAGS) $(DH_CUDA)' \
    print-cuda "$@"
}
[ "$(cuda_choice DEB_BUILD_PROFILES=nocuda)" = "-DTITAN_CUDA=OFF -Ntitan-plugins-cuda" ] ||
  fail "debian/rules builds CUDA under the nocuda profile: $(cuda_choice DEB_BUILD_PROFILES=nocuda)"
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  [[ "$(cuda_choice)" == "-DTITAN_CUDA=ON -DCMAKE_CUDA_COMPILER="*nvcc ]] ||
    fail "debian/rules does not build CUDA where the toolkit is: $(cuda_choice)"
else
  [ "$(cuda_choice)" = "-DTITAN_CUDA=OFF -Ntitan-plugins-cuda" ] ||
    fail "debian/rules builds CUDA without a toolkit: $(cuda_choice)"
fi

# The package compiles titan again: through the shared ccache (paths relative to the copy, as
# tools/dev does), nvcc included, on two cores.
export DEB_BUILD_OPTIONS="parallel=2 ${DEB_BUILD_OPTIONS:-}"
if command -v ccache >/dev/null; then
  # Named, because debhelper gives the build a HOME of its own, which would hide the cache.
  CCACHE_DIR=$(ccache --get-config cache_dir)
  export CCACHE_DIR CCACHE_BASEDIR=$tree CCACHE_NOHASHDIR=true
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  export CMAKE_CUDA_COMPILER_LAUNCHER=ccache
fi
# xz at its fastest level: these packages are built to be checked and installed once, and the
# 55 MB of titan-dbgsym, debug sections already compressed, took 42 s of CPU at xz's default
# level against 8 s at level 0, for a 0.4% smaller file. The format that lintian and apt read
# (data.tar.xz) is the same.
export DPKG_DEB_COMPRESSOR_LEVEL=${DPKG_DEB_COMPRESSOR_LEVEL:-0}
start=$SECONDS
(cd "$tree" && dpkg-buildpackage -b -us -uc >"$work/build.log" 2>&1) ||
  { tail -50 "$work/build.log"; fail "dpkg-buildpackage -b"; }
echo "dpkg-buildpackage -b: $((SECONDS - start)) s"

arch=$(dpkg --print-architecture)
deb() { echo "$work/$1_${version}_$2.deb"; }
titan=$(deb titan "$arch") dev=$(deb titan-dev "$arch") cuda=$(deb titan-plugins-cuda "$arch")
[ -f "$titan" ] || fail "no $titan"
[ -f "$dev" ] || fail "no $dev"
if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
  [ -f "$cuda" ] || fail "the CUDA toolkit is here but $cuda was not built"
else
  [ ! -e "$cuda" ] || fail "no CUDA toolkit here, yet $cuda was built"
fi

has() {  # has DEB PATH...: each PATH is in DEB
  local contents
  contents=$(dpkg-deb -c "$1" | awk '{print $6}' | sed 's|^\.||; s|/$||')
  shift
  for path in "$@"; do grep -qx -- "$path" <<<"$contents" || fail "package lacks $path"; done
}
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
plugins=/usr/lib/$multiarch/titan/plugins
has "$titan" /usr/bin/titan-run /usr/bin/titan-checkpoint /usr/bin/titan-generate \
  /usr/bin/titan-lbdc /usr/bin/titan-tokenize /usr/bin/titan-plot $plugins/titan_optimizer_adamw.so \
  $plugins/titan_comm_mpi.so $plugins/titan_parallel_fsdp.so \
  $plugins/titan_checkpoint_safetensors.so /usr/share/titan/recipes/llama3_debug.toml \
  /usr/share/man/man1/titan-run.1.gz /usr/share/man/man1/titan-checkpoint.1.gz \
  /usr/share/man/man1/titan-generate.1.gz /usr/share/man/man1/titan-lbdc.1.gz \
  /usr/share/man/man1/titan-tokenize.1.gz /usr/share/man/man1/titan-plot.1.gz
has "$dev" /usr/include/titan/plugin.h /usr/include/titan/abi.h \
  /usr/lib/$multiarch/cmake/TitanSDK/TitanSDKConfig.cmake \
  /usr/lib/$multiarch/cmake/TitanSDK/TitanSDKConfigVersion.cmake \
  /usr/lib/$multiarch/cmake/TitanSDK/TitanPlugin.cmake \
  /usr/share/doc/titan-dev/examples/lion.cc /usr/share/doc/titan-dev/examples/CMakeLists.txt
# The user guide, uncompressed, with every page the README links to.
guide=$(grep -o '](docs/[a-z0-9_-]*\.md' "$source_dir/README.md" | sed 's|^](|/usr/share/doc/titan/|' | sort -u)
[ -n "$guide" ] || fail "README.md links to no page of docs/"
has "$titan" /usr/share/doc/titan/README.md /usr/share/doc/titan/docs/reference.md $guide
# grep reads whole lists from variables: under pipefail, an early exit would fail the pipe.
titan_files=$(dpkg-deb -c "$titan")
if grep -q "titan_device_cuda\|titan_comm_nccl\|testgood\|badabi\|oldabi\|noentry" <<<"$titan_files"; then
  fail "titan holds a GPU plugin or a test plugin"
fi
if [ -f "$cuda" ]; then
  has "$cuda" $plugins/titan_device_cuda.so $plugins/titan_comm_nccl.so
  [ "$(dpkg-deb -c "$cuda" | grep -c '\.so$')" = 2 ] ||
    fail "$cuda holds more than the cuda and nccl plugins"
  grep -q "titan (= $version)" <<<"$(dpkg-deb -f "$cuda" Depends)" || fail "$cuda: Depends"
fi

# Dependencies: dpkg-shlibdeps' from the binaries, and what the packaged recipes read.
depends=$(dpkg-deb -f "$titan" Depends)
echo "titan Depends: $depends"
for package in libabsl libspdlog libc6 libstdc++6 libopenmpi3 libzstd1 libgomp1 libelf1 \
               libopenblas0-openmp fortunes; do
  grep -q "\b$package" <<<"$depends" || fail "titan's Depends lacks $package"
done
grep -q "titan (= $version)" <<<"$(dpkg-deb -f "$dev" Depends)" || fail "titan-dev: Depends"

# One version: CMakeLists.txt's, in every package, titan-run --version and the SDK's CMake file.
for file in "$titan" "$dev"; do
  [ "$(dpkg-deb -f "$file" Version)" = "$version" ] || fail "$file: Version is not $version"
done
dpkg-deb -x "$titan" "$work/root"
dpkg-deb -x "$dev" "$work/root"
abi=$(sed -n 's/^#define TITAN_ABI_VERSION \([0-9]*\)$/\1/p' "$work/root/usr/include/titan/abi.h")
[ "$("$work/root/usr/bin/titan-run" --version)" = "titan $version (plugin ABI $abi)" ] ||
  fail "titan-run --version: $("$work/root/usr/bin/titan-run" --version)"
grep -q "set(PACKAGE_VERSION \"$version\")" \
  "$work/root/usr/lib/$multiarch/cmake/TitanSDK/TitanSDKConfigVersion.cmake" ||
  fail "TitanSDKConfigVersion.cmake does not say $version"

# The man pages are the tools' --help.
man=$(zcat "$work/root/usr/share/man/man1/titan-run.1.gz")
grep -q -- "list\\\\-plugins" <<<"$man" || fail "titan-run.1 lacks --list-plugins"
grep -q "titan-run $version" <<<"$man" || fail "titan-run.1 lacks the version"
grep -q "SLURM_LOCALID" <<<"$man" || fail "titan-run.1 lacks the launchers' variables"

# lintian: no errors (warnings are printed).
changes=$work/titan_${version}_$arch.changes
lintian --fail-on error "$changes" | tee "$work/lintian.log" ||
  fail "lintian found errors in $changes"
# Passed: the build tree (about 2 GB) goes; the .debs stay. A failure keeps it to look at.
rm -rf "$tree"
echo "deb build test passed"
