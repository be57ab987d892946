# Sourced by the tests that work in a clean Debian 12 root: the root made by debootstrap
# (minbase) with the packages asked for, cached between runs outside the clone
# (TITAN_DEBOOTSTRAP_CACHE, default /var/cache/titan/debootstrap) one per package list, and a way
# to run a command inside a copy of it. Needs root.
debian_suite=bookworm
debian_mirror=${TITAN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
debian_cache=${TITAN_DEBOOTSTRAP_CACHE:-/var/cache/titan/debootstrap}

# in_root ROOT COMMAND...: in a private mount namespace, so /proc, /sys and /dev vanish with the
# command, whatever happens.
in_root() {
  local root=$1
  shift
  unshare --mount --propagation private -- bash -c '
    root=$1; shift
    mount -t proc proc "$root/proc" && mount -t sysfs sysfs "$root/sys" &&
      mount --rbind /dev "$root/dev" &&
      exec chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive "$@"' in_root "$root" "$@"
}

# cached_debian_root LOG PACKAGE...: prints the folder of the cached root holding minbase and
# PACKAGE... (none: minbase alone), building it first when missing. Roots of other package
# lists stay for other checkouts, until a week unused.
cached_debian_root() {
  local log=$1
  shift
  local key base
  key=$(printf '%s\n' "$debian_suite" "$debian_mirror" "$@" | sha256sum | cut -c1-16)
  base=$debian_cache/$debian_suite-$key
  if [ ! -d "$base" ]; then
    echo "building the cached root $base: minbase ${*:-}" >&2
    mkdir -p "$debian_cache"
    exec 9>"$debian_cache/.lock"
    flock 9
    if [ ! -d "$base" ]; then
      rm -rf "$base.new"
      debootstrap --variant=minbase "$debian_suite" "$base.new" "$debian_mirror" >"$log" 2>&1 ||
        { tail -20 "$log" >&2; echo "FAIL: debootstrap $debian_suite" >&2; return 1; }
      if [ $# -gt 0 ]; then
        in_root "$base.new" sh -c "apt-get update -q && apt-get install -y -q \
          --no-install-recommends $* && apt-get clean" >>"$log" 2>&1 ||
          { tail -20 "$log" >&2; echo "FAIL: installing $* into the root" >&2; return 1; }
      fi
      mv "$base.new" "$base"
    fi
    flock -u 9
  fi
  touch "$base"
  find "$debian_cache" -mindepth 1 -maxdepth 1 -name "$debian_suite-*" ! -name "*.new" -mtime +7 \
    -exec rm -rf {} +
  echo "$base"
}
