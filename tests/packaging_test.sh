#!/usr/bin/env bash
# Builds the Debian (and, where rpmbuild exists, the RPM) package from BUILD_DIR, checks its
# files and dependencies, unpacks the .deb and runs the titan-run inside it.
set -euo pipefail
build_dir=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

(cd "$build_dir" && cpack -G DEB -B "$work" >"$work/cpack-deb.log") || { cat "$work/cpack-deb.log"; fail "cpack DEB"; }
deb=$(ls "$work"/*.deb)
contents=$(dpkg-deb -c "$deb")
for path in ./usr/bin/titan-run ./usr/lib/titan/plugins/titan_optimizer_adamw.so \
            ./usr/bin/titan-checkpoint ./usr/lib/titan/plugins/titan_checkpoint_safetensors.so \
            ./usr/include/titan/plugin.h ./usr/lib/cmake/TitanSDK/TitanSDKConfig.cmake \
            ./usr/lib/cmake/TitanSDK/TitanPlugin.cmake ./usr/share/titan/recipes/llama3_debug.toml; do
  grep -q " $path\$" <<<"$contents" || fail "$deb lacks $path"
done
if grep -q "titan_optimizer_testgood\|badabi\|noentry" <<<"$contents"; then fail "test plugins were packaged"; fi
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for package in libabsl libspdlog libc6 libstdc++6 libopenblas0-openmp; do
  grep -q "$package" <<<"$depends" || fail "Depends lacks $package"
done

dpkg-deb -x "$deb" "$work/root"
list=$(env -u TITAN_PLUGIN_PATH "$work/root/usr/bin/titan-run" --list-plugins)
grep -q "$work/root/usr/lib/titan/plugins/titan_optimizer_adamw.so" <<<"$list" || fail "unpacked titan-run does not find its plugins"
env -u TITAN_PLUGIN_PATH "$work/root/usr/bin/titan-run" \
  --recipe "$work/root/usr/share/titan/recipes/llama3_debug.toml" --validate 2>&1 | grep -q "recipe is valid" \
  || fail "unpacked titan-run does not validate its recipe"
# The unpacked titan-checkpoint finds the safetensors plugin beside it and reaches the folder.
out=$(env -u TITAN_PLUGIN_PATH "$work/root/usr/bin/titan-checkpoint" list "$work/none" \
        --format=safetensors 2>&1 || true)
grep -q "$work/none: no such folder" <<<"$out" || fail "unpacked titan-checkpoint: $out"

if command -v rpmbuild >/dev/null; then
  (cd "$build_dir" && cpack -G RPM -B "$work" >"$work/cpack-rpm.log") || { cat "$work/cpack-rpm.log"; fail "cpack RPM"; }
  rpm_file=$(ls "$work"/*.rpm)
  files=$(rpm -qlp "$rpm_file" 2>/dev/null)
  grep -qx /usr/bin/titan-run <<<"$files" || fail "$rpm_file lacks /usr/bin/titan-run"
  grep -qx /usr/lib/titan/plugins/titan_optimizer_adamw.so <<<"$files" || fail "$rpm_file lacks adamw"
  rpm -qp --requires "$rpm_file" 2>/dev/null | grep -q "libabsl" || fail "RPM requires lacks libabsl"
else
  echo "rpmbuild not installed: RPM not checked (tools/setup-deps installs it)"
fi
echo "packaging test passed"
