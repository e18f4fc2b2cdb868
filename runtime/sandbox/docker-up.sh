#!/usr/bin/env bash
# Makes sure a Docker Engine answers at $LATHE_DOCKER (default
# unix:///var/run/docker.sock) and holds the sandbox image
# lathe.local/sandbox:bookworm and :nopython, for the remote provider's driver and tests.
#
# Installs openssh-server (not started: the ssh:// test runs its own sshd).
# If nothing answers, installs Debian's docker.io (no recommends, its init
# scripts kept from starting anything) and starts dockerd in the background:
#   - on the containerd that containerd-up.sh serves ($LATHE_CONTAINERD), in
#     its own namespace "moby": the "lathe" namespace is never touched;
#   - with --iptables=false --ip6tables=false: dockerd never touches the host
#     firewall, so containerd's sandboxes keep their own nftables tables.
#     Sandboxes of network host-egress sit on the engine network
#     lathe-egress (bridge lathedk0, $LATHE_DOCKER_EGRESS_SUBNET, traffic
#     between containers off), which this script makes and gives Lathe's own
#     nftables table, like the containerd driver's bridge: masquerade what
#     leaves the subnet, drop bridge traffic between sandboxes;
#   - with --userland-proxy=false: Lathe publishes no port (it reaches a
#     sandbox's loopback through the engine API), so no docker-proxy runs.
# No systemd here: dockerd is detached with setsid and logs to
# $LATHE_DOCKER_LOG. The image is the same OCI tarball build-image.sh makes
# for containerd, given a docker-archive manifest.json (docker 20.10's
# `docker load` does not read OCI layouts). Idempotent; fast when all is up.
#
#   LATHE_DOCKER             engine socket    unix:///var/run/docker.sock
#   LATHE_DOCKER_ROOT        dockerd data     /var/lib/lathe/docker
#   LATHE_DOCKER_BRIDGE      docker0 address  172.17.0.1/16
#   LATHE_DOCKER_EGRESS_SUBNET  lathe-egress  10.90.0.0/16
#   LATHE_DOCKER_LOG         daemon log       /var/log/lathe-dockerd.log
#   LATHE_CONTAINERD         containerd       /run/containerd/containerd.sock
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

HOST=${LATHE_DOCKER:-unix:///var/run/docker.sock}
SOCK=${HOST#unix://}
ROOT=${LATHE_DOCKER_ROOT:-/var/lib/lathe/docker}
BRIDGE_ADDR=${LATHE_DOCKER_BRIDGE:-172.17.0.1/16}
LOG=${LATHE_DOCKER_LOG:-/var/log/lathe-dockerd.log}
CONTAINERD=${LATHE_CONTAINERD:-/run/containerd/containerd.sock}
EGRESS_SUBNET=${LATHE_DOCKER_EGRESS_SUBNET:-10.90.0.0/16}
NETWORK=lathe-egress
BRIDGE=lathedk0 # an interface name that is also an nftables identifier

# Files and directories removed on exit.
cleanup=()
trap 'rm -rf "${cleanup[@]}"' EXIT

[ "$SOCK" != "$HOST" ] || die "LATHE_DOCKER must be a unix:// address, not $HOST"

answers() {
	[ -S "$SOCK" ] && timeout 5 docker -H "$HOST" version --format '{{.Server.APIVersion}}' >/dev/null 2>&1
}

# install_quiet CMD PKG: apt_ensure, with the package's maintainer scripts
# kept from starting its service (docker.io would start dockerd with its
# defaults, iptables on; openssh-server an sshd on port 22). An absent
# policy-rc.d is made to refuse for the install, then removed again.
install_quiet() {
	have "$1" && return 0
	local policy=/usr/sbin/policy-rc.d
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy"
		cleanup+=("$policy")
	fi
	apt_ensure "$@"
}

# bridge_rules: Lathe's nftables table for dockerd's bridge (rewritten whole).
bridge_rules() {
	local subnet
	subnet=$(ip -4 route show dev "$BRIDGE" proto kernel 2>/dev/null | awk '{print $1; exit}')
	[ -n "$subnet" ] || { log "no $BRIDGE bridge: host-egress sandboxes will have no way out"; return 0; }
	nft -f - <<-NFT
		table ip lathe_$BRIDGE {}
		flush table ip lathe_$BRIDGE
		table ip lathe_$BRIDGE {
			chain postrouting {
				type nat hook postrouting priority srcnat; policy accept;
				ip saddr $subnet oifname != "$BRIDGE" masquerade
			}
		}
		table bridge lathe_$BRIDGE {}
		flush table bridge lathe_$BRIDGE
		table bridge lathe_$BRIDGE {
			chain forward {
				type filter hook forward priority filter; policy accept;
				iifname "veth*" oifname "veth*" drop
			}
		}
	NFT
}

apt_ensure nft nftables
apt_ensure ip iproute2
# The ssh:// test runs its own sshd (never the system's) in front of the engine.
install_quiet /usr/sbin/sshd openssh-server

if ! answers; then
	[ "$(id -u)" = 0 ] || die "no Docker Engine at $HOST and starting one needs root"
	install_quiet dockerd docker.io
	[ -S "$CONTAINERD" ] && timeout 5 ctr --address "$CONTAINERD" --connect-timeout 2s version >/dev/null 2>&1 ||
		die "no containerd at $CONTAINERD for dockerd (run make containerd-up first)"
	if [ -S "$SOCK" ]; then
		ss -xlnH 2>/dev/null | grep -qF " $SOCK " && die "something listens at $SOCK but does not answer as a Docker Engine"
		rm -f "$SOCK"
	fi
	mkdir -p "$ROOT" "$(dirname "$SOCK")" "$(dirname "$LOG")"
	log "starting dockerd at $HOST (log: $LOG)"
	setsid nohup dockerd -H "$HOST" --containerd "$CONTAINERD" --data-root "$ROOT" \
		--exec-root /run/lathe/docker --pidfile /run/lathe/docker.pid \
		--iptables=false --ip6tables=false --ip-masq=false --userland-proxy=false \
		--bip "$BRIDGE_ADDR" --log-level warn </dev/null >>"$LOG" 2>&1 &
	await_daemon "dockerd at $HOST" $! "$LOG" 30
fi
# host-egress sandboxes' network (the driver would make one without the
# fixed bridge name and subnet the rules need).
if ! docker -H "$HOST" network inspect "$NETWORK" >/dev/null 2>&1; then
	docker -H "$HOST" network create --driver bridge --subnet "$EGRESS_SUBNET" \
		-o com.docker.network.bridge.name="$BRIDGE" -o com.docker.network.bridge.enable_icc=false \
		"$NETWORK" >/dev/null
fi
nft delete table ip lathe_docker0 2>/dev/null || true # rules of an earlier version
nft delete table bridge lathe_docker0 2>/dev/null || true
bridge_rules

# The sandbox images: the same tarballs as containerd's, loaded once each.
for variant in bookworm nopython; do
	image=lathe.local/sandbox:$variant
	docker -H "$HOST" image inspect "$image" >/dev/null 2>&1 && continue
	if [ "$variant" = bookworm ]; then tarball=$("$here/build-image.sh"); else tarball=$("$here/build-image.sh" "$variant"); fi
	work=$(mktemp -d /var/tmp/lathe-docker-load.XXXXXX)
	cleanup+=("$work")
	# index.json -> manifest blob -> config and layer blobs (build-image.sh
	# writes these JSON documents, one digest per field, config first).
	manifest=$(tar -xOf "$tarball" index.json | grep -o '"digest":"sha256:[0-9a-f]*"' | head -n1 | cut -d: -f3 | tr -d '"')
	mapfile -t digests < <(tar -xOf "$tarball" "blobs/sha256/$manifest" | grep -o '"digest":"sha256:[0-9a-f]*"' | cut -d: -f3 | tr -d '"')
	[ "${#digests[@]}" -ge 2 ] || die "cannot read the image manifest in $tarball"
	layers=$(printf ',"blobs/sha256/%s"' "${digests[@]:1}")
	printf '[{"Config":"blobs/sha256/%s","RepoTags":["%s"],"Layers":[%s]}]' \
		"${digests[0]}" "$image" "${layers#,}" >"$work/manifest.json"
	cp "$tarball" "$work/image.tar"
	tar -rf "$work/image.tar" -C "$work" manifest.json
	log "loading $image into the Docker Engine at $HOST"
	docker -H "$HOST" load -i "$work/image.tar" >/dev/null
	docker -H "$HOST" image inspect "$image" >/dev/null 2>&1 || die "docker load did not register $image"
done
