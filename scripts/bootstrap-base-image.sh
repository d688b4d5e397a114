#!/usr/bin/env bash
# Builds the local base image (default tag moat-base:bookworm) without any image registry.
#
# Why: on hosts that cannot pull `debian:bookworm`, the sandbox image still has to build.
# debootstrap assembles a Debian root filesystem from the Debian mirror this host's apt is
# already configured with (read from /etc/apt/sources.list{,.d}), and `docker import` turns it
# into an image. No mirror host is written anywhere in moat: it is read from the host.
#
# The core packages the sandbox image wants are included here. The toolchain is not: it is
# installed by images/sandbox/Dockerfile from the apt sources debootstrap writes into this base
# (the same host mirror), so this base stays small for the runtime image built on it too
# (scripts/build-moat-image, Dockerfile.local).
set -euo pipefail

tag="${1:-moat-base:bookworm}"
suite="${MOAT_BASE_SUITE:-bookworm}"
packages="bash,coreutils,git,curl,jq,python3,ripgrep,procps,ca-certificates,less"

die() { echo "bootstrap-base-image: $*" >&2; exit 1; }

if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "base image $tag already present"
  exit 0
fi

# The first Debian archive URI the host's apt uses (deb822 `URIs:` or one-line `deb URI suite`).
mirror="${MOAT_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    mirror=$(awk '/^URIs:/ { for (i = 2; i <= NF; i++) if ($i !~ /security/) { print $i; exit } }' "$f")
    [ -n "$mirror" ] && break
  done
fi
if [ -z "$mirror" ]; then
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    mirror=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { if ($i !~ /security/) { print $i; exit } } }' "$f")
    [ -n "$mirror" ] && break
  done
fi
[ -n "$mirror" ] || die "found no Debian mirror in /etc/apt/sources.list{,.d}; set MOAT_DEBIAN_MIRROR"

if ! command -v debootstrap >/dev/null 2>&1; then
  command -v apt-get >/dev/null 2>&1 || die "debootstrap is missing and apt-get is not available to install it"
  echo "installing debootstrap"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
fi

rootfs=$(mktemp -d /tmp/moat-rootfs.XXXXXX)
trap 'rm -rf "$rootfs"' EXIT

echo "bootstrapping Debian $suite from the host's mirror configuration into $rootfs"
debootstrap --variant=minbase --include="$packages" "$suite" "$rootfs" "$mirror" >/tmp/moat-debootstrap.log 2>&1 \
  || { tail -n 30 /tmp/moat-debootstrap.log >&2; die "debootstrap failed (full log: /tmp/moat-debootstrap.log)"; }

# Keep the image small and free of this host's apt state.
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/tmp/*

echo "importing $tag"
tar -C "$rootfs" -c . | docker import \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["bash"]' \
  - "$tag" >/dev/null
echo "built $tag"
