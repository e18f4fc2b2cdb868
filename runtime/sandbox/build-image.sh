#!/usr/bin/env bash
# Builds the sandbox image lathe.local/sandbox:bookworm without any container
# registry: a debootstrap minbase rootfs (bash, git, coreutils, ca-certificates,
# python3) packed as an OCI image layout tarball that `ctr images import` takes.
#
# The result is cached at $LATHE_IMAGE_CACHE/sandbox-bookworm.oci.tar (default
# /var/cache/lathe) and reused when present; --force rebuilds it.
# Prints the tarball path on stdout.
#
# debootstrap gets NO mirror argument: it uses its own default, the same
# archive as this machine's apt sources.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

IMAGE_NAME=lathe.local/sandbox:bookworm
SUITE=bookworm
INCLUDE=bash,git,coreutils,ca-certificates,python3
CACHE=${LATHE_IMAGE_CACHE:-/var/cache/lathe}
OUT=$CACHE/sandbox-bookworm.oci.tar
# Fixed timestamp for the layer entries and the config. Packing is stable (order,
# owners, times, gzip -n); debootstrap's own output still varies per build.
EPOCH=${SOURCE_DATE_EPOCH:-1700000000}

force=0
[ "${1:-}" = --force ] && force=1

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap)"
mkdir -p "$CACHE"
# One builder at a time; a second caller waits, then finds the cache.
exec 9>"$CACHE/.sandbox-bookworm.lock"
flock 9
if [ "$force" = 0 ] && [ -s "$OUT" ]; then
	echo "$OUT"
	exit 0
fi

apt_ensure debootstrap debootstrap
apt_ensure /usr/share/keyrings/debian-archive-keyring.gpg debian-archive-keyring

work=$(mktemp -d /var/tmp/lathe-image.XXXXXX)
cleanup() {
	# debootstrap may leave /proc, /sys or /dev mounted in the target on failure.
	grep -o " $work/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT

rootfs=$work/rootfs
log "debootstrap $SUITE (minbase + $INCLUDE)"
start=$(date +%s)
debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$rootfs" >"$work/debootstrap.log" 2>&1 ||
	{ tail -n 30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
log "debootstrap took $(($(date +%s) - start)) s"

# Trim: package lists, caches, logs, docs and host leftovers.
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/var/cache/debconf/*-old \
	"$rootfs"/var/log/* "$rootfs"/tmp/* "$rootfs"/var/tmp/* "$rootfs"/root/.cache \
	"$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
	"$rootfs"/var/lib/dpkg/*-old "$rootfs"/debootstrap
find "$rootfs"/usr/lib/python3* -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null || true
: >"$rootfs/etc/resolv.conf"   # the runtime provides these per container
echo sandbox >"$rootfs/etc/hostname"
# The runtime mounts its own /dev; drop debootstrap's device nodes (never
# through a mount point).
mountpoint -q "$rootfs/dev" || rm -rf "${rootfs:?}"/dev/*

# Layer: one gzip tar of the rootfs with stable order, owners and times.
layout=$work/layout
blobs=$layout/blobs/sha256
mkdir -p "$blobs"
tar -C "$rootfs" --sort=name --numeric-owner --mtime="@$EPOCH" --clamp-mtime \
	--pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
	-cf "$work/layer.tar" .
diff_id=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
gzip -n -c "$work/layer.tar" >"$work/layer.tar.gz"
rm -f "$work/layer.tar"

# put FILE: store FILE as a blob; sets $digest and $size.
put() {
	digest=$(sha256sum "$1" | cut -d' ' -f1)
	size=$(stat -c %s "$1")
	mv "$1" "$blobs/$digest"
}
put "$work/layer.tar.gz"
layer_digest=$digest layer_size=$size

arch=$(dpkg --print-architecture) # amd64/arm64: the same names as GOARCH
created=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)
path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
printf '{"architecture":"%s","os":"linux","created":"%s","config":{"Env":["PATH=%s","LANG=C.UTF-8"],"Cmd":["bash"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created":"%s","created_by":"debootstrap --variant=minbase --include=%s %s"}]}' \
	"$arch" "$created" "$path" "$diff_id" "$created" "$INCLUDE" "$SUITE" >"$work/config.json"
put "$work/config.json"
config_digest=$digest config_size=$size

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
	"$config_digest" "$config_size" "$layer_digest" "$layer_size" >"$work/manifest.json"
put "$work/manifest.json"

printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
	"$digest" "$size" "$arch" "$IMAGE_NAME" "${IMAGE_NAME##*:}" >"$layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"

# The layout itself, as a plain tar (the layer is already compressed).
tar -C "$layout" --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$EPOCH" \
	-cf "$work/image.tar" oci-layout index.json blobs
mv "$work/image.tar" "$OUT.tmp" && mv "$OUT.tmp" "$OUT"
log "built $IMAGE_NAME: $OUT ($(du -h "$OUT" | cut -f1))"
echo "$OUT"
