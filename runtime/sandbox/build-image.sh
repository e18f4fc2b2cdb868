#!/usr/bin/env bash
# Builds the sandbox image lathe.local/sandbox:bookworm without any container
# registry: a debootstrap minbase rootfs (bash, git, coreutils, ca-certificates,
# python3) packed as an OCI image layout tarball that `ctr images import` takes.
#
# `build-image.sh nopython` derives lathe.local/sandbox:nopython from it: the
# same layer plus one of whiteouts that removes python3 (its programs and
# libraries), for the tests that Lathe needs nothing of an image. A few
# seconds, no debootstrap; the base layer is shared (by digest) on import.
#
# The results are cached at $LATHE_IMAGE_CACHE/sandbox-bookworm.oci.tar and
# sandbox-nopython.oci.tar (default /var/cache/lathe) and reused when present;
# --force rebuilds them. Prints the tarball path on stdout.
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

NOPY_NAME=lathe.local/sandbox:nopython
NOPY_OUT=$CACHE/sandbox-nopython.oci.tar

force=0 variant=bookworm
for arg; do
	case $arg in
	--force) force=1 ;;
	nopython) variant=nopython ;;
	*) die "usage: build-image.sh [--force] [nopython]" ;;
	esac
done

[ "$(id -u)" = 0 ] || die "must run as root (debootstrap)"
mkdir -p "$CACHE"
# One builder at a time; a second caller waits, then finds the cache.
exec 9>"$CACHE/.sandbox-bookworm.lock"
flock 9

work=$(mktemp -d /var/tmp/lathe-image.XXXXXX)
cleanup() {
	# debootstrap may leave /proc, /sys or /dev mounted in the target on failure.
	grep -o " $work/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
	rm -rf --one-file-system "$work"
}
trap cleanup EXIT

# put FILE: store FILE as a blob of $blobs; sets $digest and $size.
put() {
	digest=$(sha256sum "$1" | cut -d' ' -f1)
	size=$(stat -c %s "$1")
	mv "$1" "$blobs/$digest"
}

arch=$(dpkg --print-architecture) # amd64/arm64: the same names as GOARCH
created=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)

# image NAME CREATED_BY DIFF_ID LAYER...: writes the config, the manifest
# (LAYER is DIGEST:SIZE, bottom first) and index.json of $layout for image
# NAME whose layers' uncompressed digests are the DIFF_IDs (comma-joined,
# each "sha256:…").
image() {
	local name=$1 by=$2 diff_ids=$3
	shift 3
	local path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
	printf '{"architecture":"%s","os":"linux","created":"%s","config":{"Env":["PATH=%s","LANG=C.UTF-8"],"Cmd":["bash"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":[%s]},"history":[{"created":"%s","created_by":"%s"}]}' \
		"$arch" "$created" "$path" "$diff_ids" "$created" "$by" >"$work/config.json"
	put "$work/config.json"
	local layers="" l
	for l; do
		layers+=$(printf ',{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}' "${l%%:*}" "${l#*:}")
	done
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[%s]}' \
		"$digest" "$size" "${layers#,}" >"$work/manifest.json"
	put "$work/manifest.json"
	printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"platform":{"architecture":"%s","os":"linux"},"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
		"$digest" "$size" "$arch" "$name" "${name##*:}" >"$layout/index.json"
	printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
}

# pack OUT: the layout itself as OUT, a plain tar (the layers are compressed).
pack() {
	tar -C "$layout" --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$EPOCH" \
		-cf "$work/image.tar" oci-layout index.json blobs
	mv "$work/image.tar" "$1.tmp" && mv "$1.tmp" "$1"
}

# derive_nopython: lathe.local/sandbox:nopython from the cached base tarball.
derive_nopython() {
	layout=$work/nopython
	blobs=$layout/blobs/sha256
	mkdir -p "$layout"
	tar -C "$layout" -xf "$OUT"
	local manifest config base_layer base_size base_diff
	manifest=$(grep -o '"digest":"sha256:[0-9a-f]*"' "$layout/index.json" | head -n1 | cut -d: -f3 | tr -d '"')
	config=$(grep -o '"config":{[^}]*}' "$blobs/$manifest" | grep -o 'sha256:[0-9a-f]*' | cut -d: -f2)
	base_layer=$(grep -o '"layers":\[{[^}]*}' "$blobs/$manifest" | grep -o 'sha256:[0-9a-f]*' | cut -d: -f2)
	base_size=$(stat -c %s "$blobs/$base_layer")
	base_diff=$(grep -o '"diff_ids":\["sha256:[0-9a-f]*"\]' "$blobs/$config" | grep -o 'sha256:[0-9a-f]*')
	[ -n "$base_layer" ] && [ -n "$base_diff" ] || die "cannot read the layers of $OUT"
	rm -f "$blobs/$manifest" "$blobs/$config"
	# One whiteout per python3 program and library tree of the base layer.
	local wh=$work/whiteouts p n=0
	mkdir -p "$wh"
	while IFS= read -r p; do
		p=${p#./}
		p=${p%/}
		mkdir -p "$wh/$(dirname "$p")"
		: >"$wh/$(dirname "$p")/.wh.$(basename "$p")"
		n=$((n + 1))
	done < <(tar -tzf "$blobs/$base_layer" | grep -E '^\./((usr/bin/(python|py3|pydoc|pygettext)[^/]*)|((usr/lib|usr/local/lib|etc)/python3[^/]*/))$')
	[ "$n" -gt 0 ] || die "no python3 in the base layer of $OUT"
	tar -C "$wh" --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$EPOCH" -cf "$work/wh.tar" .
	local wh_diff
	wh_diff=$(sha256sum "$work/wh.tar" | cut -d' ' -f1)
	gzip -n -c "$work/wh.tar" >"$work/wh.tar.gz"
	put "$work/wh.tar.gz"
	image "$NOPY_NAME" "$SUITE minbase without python3 ($n whiteouts)" "\"$base_diff\",\"sha256:$wh_diff\"" \
		"$base_layer:$base_size" "$digest:$size"
	pack "$NOPY_OUT"
	log "derived $NOPY_NAME: $NOPY_OUT ($n whiteouts)"
}

if [ "$force" = 0 ] && [ -s "$OUT" ]; then
	if [ "$variant" = bookworm ]; then
		echo "$OUT"
		exit 0
	fi
	if [ ! -s "$NOPY_OUT" ]; then
		derive_nopython
	fi
	echo "$NOPY_OUT"
	exit 0
fi

apt_ensure debootstrap debootstrap
apt_ensure /usr/share/keyrings/debian-archive-keyring.gpg debian-archive-keyring

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

put "$work/layer.tar.gz"
image "$IMAGE_NAME" "debootstrap --variant=minbase --include=$INCLUDE $SUITE" "\"sha256:$diff_id\"" "$digest:$size"
pack "$OUT"
log "built $IMAGE_NAME: $OUT ($(du -h "$OUT" | cut -f1))"
if [ "$variant" = nopython ]; then
	derive_nopython
	echo "$NOPY_OUT"
	exit 0
fi
echo "$OUT"
