#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# Build, or reuse from a cache outside the clone, a guest kernel with lockdep,
# KASAN, debug-objects, kmemleak and UBSAN, made from Debian's linux-source-6.1
# with the config fragment in kmod-glue/kernel/lockdep-ci.config on top of
# `make tinyconfig`.
#
# The cache entry is keyed by a hash of the fragment, the linux-source-6.1
# package version and `gcc --version` (plus this script's layout version). It
# holds a trimmed build tree to build out-of-tree modules against, the
# bzImage, and the kernel's own modules (ib_core, rdmavt, ... for the rebuilt
# hfi1.ko) under modules/kernel/ laid out as in /lib/modules; it is written under a temporary name and renamed when complete, so
# a half-written entry is never used.
#
# Usage: debug-kernel.sh [--print-key]
#   stdout: three shell assignments, for `eval "$(debug-kernel.sh)"`:
#     KDIR=<cache>/build          (make -C "$KDIR" M=... modules)
#     KERNEL_IMAGE=<cache>/bzImage
#     KERNEL_MODULES=<cache>/modules/kernel  (<path>/<name>.ko)
#   stderr: progress.
# Environment:
#   HFI1_KERNEL_CACHE  cache root (default /var/cache/hfi1-tid)
#   HFI1_KBUILD_JOBS   make -j (default 2)
#   HFI1_KEEP_KBUILD=1 keep the full build directory on failure
#   HFI1_KERNEL_NO_INSTALL=1 never run apt-get (fail instead)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
fragment="$here/../kernel/lockdep-ci.config"
cache_root="${HFI1_KERNEL_CACHE:-/var/cache/hfi1-tid}"
jobs="${HFI1_KBUILD_JOBS:-2}"
src_pkg=linux-source-6.1
src_tar=/usr/src/linux-source-6.1.tar.xz
# Bump when the layout of a cache entry changes.
layout=2

log() { printf 'debug-kernel: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ -r "$fragment" ]] || die "missing fragment $fragment"

# Build dependencies. apt only when something is missing.
need_pkgs=()
dpkg-query -W -f='${Status}' "$src_pkg" 2>/dev/null | grep -q 'ok installed' ||
	need_pkgs+=("$src_pkg")
for tool in bison:bison flex:flex bc:bc; do
	command -v "${tool%%:*}" >/dev/null || need_pkgs+=("${tool#*:}")
done
for pkg in libelf-dev libssl-dev; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' ||
		need_pkgs+=("$pkg")
done
if ((${#need_pkgs[@]})); then
	[[ "${HFI1_KERNEL_NO_INSTALL:-0}" == 1 ]] && die "missing packages: ${need_pkgs[*]}"
	log "installing ${need_pkgs[*]}"
	apt-get -o DPkg::Lock::Timeout=600 update >&2
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 \
		install -y --no-install-recommends "${need_pkgs[@]}" >&2
fi
[[ -r "$src_tar" ]] || die "$src_tar not found after installing $src_pkg"

src_version="$(dpkg-query -W -f='${Version}' "$src_pkg")"
cc_version="$(gcc --version | head -n1)"
key="$(
	{
		printf 'layout %s\n' "$layout"
		printf 'source %s %s\n' "$src_pkg" "$src_version"
		printf 'cc %s\n' "$cc_version"
		cat "$fragment"
	} | sha256sum | cut -c1-16
)"
if [[ "${1:-}" == --print-key ]]; then
	echo "$key"
	exit 0
fi

entry="$cache_root/debug-kernel-$key"
emit() {
	printf 'KDIR=%s\n' "$entry/build"
	printf 'KERNEL_IMAGE=%s\n' "$entry/bzImage"
	printf 'KERNEL_MODULES=%s\n' "$entry/modules/kernel"
}

complete() {
	[[ -f "$entry/COMPLETE" && -f "$entry/bzImage" && -f "$entry/build/Module.symvers" &&
		-d "$entry/modules/kernel" ]]
}

if complete; then
	log "cache hit: $entry ($src_pkg $src_version, $cc_version)"
	emit
	exit 0
fi

mkdir -p "$cache_root"
# One builder at a time; a second caller waits and then finds the entry.
exec 9>"$cache_root/.lock"
log "waiting for the cache lock"
flock 9
if complete; then
	log "cache hit after waiting: $entry"
	emit
	exit 0
fi

# Holding the lock, no other build runs: leftovers of a killed one can go.
rm -rf "$cache_root"/.tmp-debug-kernel-* "$cache_root"/.kbuild-*

log "cache miss: building $src_pkg $src_version with $cc_version (key $key)"
tmp="$cache_root/.tmp-debug-kernel-$key.$$"
work="$cache_root/.kbuild-$key.$$"
cleanup() {
	rm -rf "$tmp"
	if [[ "${HFI1_KEEP_KBUILD:-0}" == 1 ]]; then
		log "kept $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
rm -rf "$tmp" "$work"
mkdir -p "$tmp/build" "$work"

start=$SECONDS
log "extracting $src_tar"
tar -C "$work" -xf "$src_tar"
ksrc="$work/linux-source-6.1"
[[ -f "$ksrc/Makefile" ]] || die "unexpected tarball layout (no linux-source-6.1/Makefile)"

cd "$ksrc"
log "configuring: tinyconfig + $(basename "$fragment")"
{
	make -s ARCH=x86_64 tinyconfig &&
		scripts/kconfig/merge_config.sh -m .config "$fragment" &&
		make -s ARCH=x86_64 olddefconfig
} >"$work/config.log" 2>&1 || { tail -n 40 "$work/config.log" >&2; die "configuration failed"; }

# Every line of the fragment must have landed: `CONFIG_X=v` verbatim; a
# `# CONFIG_X is not set` line must not have become `CONFIG_X=...`.
missing=0
while IFS= read -r line; do
	if [[ "$line" =~ ^CONFIG_[A-Za-z0-9_]+= ]]; then
		grep -qxF -- "$line" .config || { log "not in .config: $line"; missing=1; }
	elif [[ "$line" =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set$ ]]; then
		if grep -q "^${BASH_REMATCH[1]}=" .config; then
			log "set although the fragment unsets it: $(grep "^${BASH_REMATCH[1]}=" .config)"
			missing=1
		fi
	fi
done <"$fragment"
((missing == 0)) || die "the fragment did not fully apply (see above)"
log "all fragment lines are in .config"

log "make -j$jobs bzImage modules (about 20 minutes on 2 cores)"
make -j"$jobs" ARCH=x86_64 bzImage modules >"$work/build.log" 2>&1 ||
	{ tail -n 40 "$work/build.log" >&2; die "kernel build failed"; }
[[ -f Module.symvers && -f arch/x86/boot/bzImage ]] || die "build left no Module.symvers or bzImage"

# Trimmed tree for out-of-tree modules, the same file set Debian's and the
# kernel's own header packages keep (scripts/package/builddeb).
log "trimming the build tree"
{
	find . arch/x86 -maxdepth 1 -name 'Makefile*'
	find include scripts -type f -o -type l
	find arch/x86 -name Kbuild.platforms -o -name Platform
	find $(find arch/x86 -name include -o -name scripts -type d) -type f
	find arch/x86/include Module.symvers include scripts -type f
	[[ -x tools/objtool/objtool ]] && echo tools/objtool/objtool
	echo .config
	echo System.map
} | sort -u | tar -cf - --no-recursion -T - | tar -C "$tmp/build" -xf -
# The trimmed tree must still be a module build tree.
for f in .config Module.symvers scripts/mod/modpost scripts/basic/fixdep \
	include/generated/autoconf.h include/config/auto.conf; do
	[[ -e "$tmp/build/$f" ]] || die "trimmed tree lacks $f"
done
if grep -qx 'CONFIG_OBJTOOL=y' .config; then
	[[ -x "$tmp/build/tools/objtool/objtool" ]] || die "trimmed tree lacks objtool"
fi
cp arch/x86/boot/bzImage "$tmp/bzImage"
# The kernel's own modules, for guests that load them (hfi1-test.sh).
find . -name '*.ko' -printf '%P\n' | sort | while IFS= read -r ko; do
	mkdir -p "$tmp/modules/kernel/$(dirname "$ko")"
	cp "$ko" "$tmp/modules/kernel/$ko"
done
[[ -f "$tmp/modules/kernel/drivers/infiniband/core/ib_core.ko" ]] || die "no ib_core.ko among the built modules"
cp .config "$tmp/config"
cp "$fragment" "$tmp/fragment.config"
{
	printf 'key %s\n' "$key"
	printf 'source %s %s\n' "$src_pkg" "$src_version"
	printf 'cc %s\n' "$cc_version"
	printf 'release %s\n' "$(make -s ARCH=x86_64 kernelrelease)"
	printf 'built %s in %ss\n' "$(date -u +%FT%TZ)" "$((SECONDS - start))"
} >"$tmp/COMPLETE"
cd /

rm -rf "$entry"
mv -T "$tmp" "$entry"
log "cached $entry ($(du -sh "$entry" | cut -f1), $((SECONDS - start)) s)"
emit
