#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
#
# CI entry for the kernel-module side: installs what the guest tests need
# (Debian kernel headers and image, qemu from bookworm-backports, a static
# busybox, coccinelle and the kernel source for the rebuilt hfi1.ko), then
# runs the guest tests. Nothing is ever loaded into the host's kernel.
#
# Environment:
#   SKIP_INSTALL=1   do not touch apt/rustup (packages already present)
#   SKIP_HFI1=1      run only the self-test module, not the rebuilt hfi1.ko
# The guest tests honour KDIR, KERNEL_IMAGE and GUEST_POWEROFF (see
# qemu-test.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

APT_LOCK=(-o DPkg::Lock::Timeout=600)
# qemu-utils 10.0 from bookworm-backports is part of the machine image;
# bookworm's own qemu-system-x86 7.2 would replace it, so qemu comes from
# backports too. A private sources list keeps the host's lists untouched.
BPO_PKGS=(qemu-system-x86/bookworm-backports qemu-system-common/bookworm-backports
          qemu-system-data/bookworm-backports seabios/bookworm-backports)
PKGS=(linux-headers-amd64 linux-image-amd64 busybox-static cpio coccinelle linux-source-6.1)

missing() {
    local p
    for p in linux-headers-amd64 linux-image-amd64 busybox-static cpio coccinelle \
             linux-source-6.1 qemu-system-x86; do
        dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' \
            || { echo "$p"; }
    done
}

install_packages() {
    if [ -z "$(missing)" ]; then
        echo "ci.sh: packages present"
        return
    fi
    local apt_dir=/var/lib/hfi1-tid/apt
    mkdir -p "$apt_dir/lists/partial"
    local mirror=http://deb.debian.org/debian
    local key=/usr/share/keyrings/debian-archive-keyring.gpg
    cat >"$apt_dir/sources.list" <<SRC
deb [signed-by=$key] $mirror bookworm main
deb [signed-by=$key] $mirror bookworm-updates main
deb [signed-by=$key] http://deb.debian.org/debian-security bookworm-security main
deb [signed-by=$key] $mirror bookworm-backports main
SRC
    local apt_priv=(-o "Dir::Etc::sourcelist=$apt_dir/sources.list"
                    -o Dir::Etc::sourceparts=- -o "Dir::State::lists=$apt_dir/lists")
    apt-get "${APT_LOCK[@]}" "${apt_priv[@]}" update -q
    DEBIAN_FRONTEND=noninteractive apt-get "${APT_LOCK[@]}" "${apt_priv[@]}" install -y -q \
        --no-install-recommends "${PKGS[@]}" "${BPO_PKGS[@]}"
}

if [ "${SKIP_INSTALL:-0}" != 1 ]; then
    install_packages
    rustup component add rust-src
    rustup target add x86_64-unknown-none
fi

# The engine's self-test module in a guest.
bash "$here/qemu-test.sh"

if [ "${SKIP_HFI1:-0}" != 1 ]; then
    # The rebuilt hfi1.ko, differential test against the originals.
    bash "$here/hfi1-test.sh"
    # ...and the deliberately broken variant, which the same test must catch.
    HFI1_TID_BROKEN=1 bash "$here/hfi1-test.sh"
fi
echo "ci.sh: all guest tests passed"
