#!/usr/bin/env bash
# Makes sure rootless Podman's Docker-compatible service answers for an
# ordinary user, $LATHE_PODMAN_USER, on that user's own socket
# ($XDG_RUNTIME_DIR/podman/podman.sock), holding the sandbox images
# lathe.local/sandbox:bookworm and :nopython in that user's storage: the
# engine a developer without root runs, for the remote provider's tests
# (make test-podman runs them as that user). Run as root; it:
#   - installs Debian's podman and what rootless Podman needs (uidmap's
#     newuidmap, slirp4netns for the user's networks, fuse-overlayfs,
#     catatonit), without recommends;
#   - makes /dev/net/tun usable by ordinary users, as udev would;
#   - creates the user, with 65536 subordinate UIDs and GIDs in /etc/subuid
#     and /etc/subgid (none of the containerd driver's range, 1<<30 up);
#   - writes the user's containers.conf: no systemd user session here
#     (no logind, no user bus), so cgroup_manager cgroupfs, events to a file;
#   - starts `podman system service --time=0` as the user, detached with
#     setsid, XDG_RUNTIME_DIR=/run/user/UID (made 0700 for the user, as
#     logind would), logging to $LATHE_PODMAN_LOG;
#   - loads build-image.sh's OCI tarballs with `podman load`, which reads
#     OCI archives and names them from their ref.name annotation.
# The running containerd and dockerd are never touched. Idempotent; fast
# when all is up. Prints nothing on stdout but, last, the socket's address.
#
#   LATHE_PODMAN_USER   the ordinary user   lathe-rootless
#   LATHE_PODMAN_LOG    the service's log   /var/log/lathe-podman.log
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"

USER_NAME=${LATHE_PODMAN_USER:-lathe-rootless}
LOG=${LATHE_PODMAN_LOG:-/var/log/lathe-podman.log}
SUBIDS=65536

[ "$(id -u)" = 0 ] || die "podman-up.sh sets up another user and needs root"

apt_ensure podman podman
apt_ensure newuidmap uidmap
apt_ensure slirp4netns slirp4netns
apt_ensure fuse-overlayfs fuse-overlayfs
apt_ensure catatonit catatonit

# slirp4netns, the network stack of the user's bridge networks, opens
# /dev/net/tun: mode 0666 on a stock Debian (udev's rule), not always here.
if [ ! -c /dev/net/tun ]; then
	log "making /dev/net/tun"
	mkdir -p /dev/net && mknod -m 0666 /dev/net/tun c 10 200
elif [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
	log "making /dev/net/tun usable by ordinary users (mode 0666, as udev does)"
	chmod 0666 /dev/net/tun
fi

if ! id -u "$USER_NAME" >/dev/null 2>&1; then
	log "creating user $USER_NAME"
	useradd --create-home --shell /bin/bash --user-group "$USER_NAME"
fi
uid=$(id -u "$USER_NAME")
home=$(getent passwd "$USER_NAME" | cut -d: -f6)

# subids FILE: give the user SUBIDS subordinate IDs in FILE, after every
# range there (from 100000, below the containerd driver's 1<<30).
subids() {
	local file=$1 start
	touch "$file"
	grep -q "^$USER_NAME:" "$file" && return 0
	start=$(awk -F: 'BEGIN{m=100000} {e=$2+$3; if (e>m) m=e} END{print m}' "$file")
	[ "$((start + SUBIDS))" -le $((1 << 30)) ] || die "no room for $USER_NAME's range in $file"
	log "giving $USER_NAME subordinate IDs $start-$((start + SUBIDS - 1)) in $file"
	printf '%s:%d:%d\n' "$USER_NAME" "$start" "$SUBIDS" >>"$file"
}
subids /etc/subuid
subids /etc/subgid

# as CMD...: run CMD as the user, in its own environment.
run_dir=/run/user/$uid
as() {
	runuser -u "$USER_NAME" -- env -i HOME="$home" USER="$USER_NAME" LOGNAME="$USER_NAME" \
		PATH=/usr/local/bin:/usr/bin:/bin XDG_RUNTIME_DIR="$run_dir" "$@"
}

install -d -m 0700 -o "$USER_NAME" -g "$USER_NAME" "$run_dir"
SOCK=$run_dir/podman/podman.sock
HOST=unix://$SOCK
PIDFILE=$run_dir/lathe-podman-service.pid
answers() {
	[ -S "$SOCK" ] && timeout 5 curl -fsS --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1
}
apt_ensure curl curl

# conf FILE TEXT: write the user's FILE unless it holds TEXT; says whether
# it wrote.
conf() {
	local file=$home/.config/containers/$1
	[ "$(cat "$file" 2>/dev/null)" = "$2" ] && return 1
	log "writing $file"
	as mkdir -p "$(dirname "$file")"
	printf '%s\n' "$2" | as tee "$file" >/dev/null
}
changed=false
conf containers.conf "$(
	cat <<-CONF
		# Written by Lathe's podman-up.sh: no systemd user session on this machine.
		[engine]
		cgroup_manager = "cgroupfs"
		events_logger = "file"
	CONF
)" && changed=true
# Without a storage.conf Podman 4.3 stores rootless images with vfs, a
# full copy of the image per container; the kernel's own overlay works in
# a user namespace (Linux 5.13 on), fuse-overlayfs where it does not.
mount_program=
as podman info --log-level=error --format '{{.Store.GraphDriverName}}' 2>/dev/null | grep -qx overlay ||
	as unshare --user --map-root-user --mount sh -c 't=$(mktemp -d) && mkdir "$t/l" "$t/u" "$t/w" "$t/m" &&
		mount -t overlay overlay -o "lowerdir=$t/l,upperdir=$t/u,workdir=$t/w" "$t/m"; r=$?; rm -rf "$t"; exit $r' 2>/dev/null ||
	mount_program='mount_program = "/usr/bin/fuse-overlayfs"'
conf storage.conf "$(
	cat <<-CONF
		# Written by Lathe's podman-up.sh.
		[storage]
		driver = "overlay"
		[storage.options.overlay]
		$mount_program
	CONF
)" && changed=true

# stop: end the service this script started (its pidfile), if running.
stop() {
	local pid
	pid=$(cat "$PIDFILE" 2>/dev/null) || return 0
	if kill -0 "$pid" 2>/dev/null; then
		log "stopping podman system service ($pid)"
		kill "$pid"
		for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	fi
	rm -f "$PIDFILE"
}
if $changed || ! as podman info --log-level=error --format '{{.Store.GraphDriverName}}' 2>/dev/null | grep -qx overlay; then
	stop
	if ! as podman info --log-level=error --format '{{.Store.GraphDriverName}}' 2>/dev/null | grep -qx overlay; then
		log "resetting $USER_NAME's podman storage for the overlay driver"
		as podman system reset --force >>"$LOG" 2>&1
	fi
fi

# A service started from a folder that is gone since (a removed checkout)
# still answers, but its conmon fails every container start ("Failed to
# get working directory"): it is started again, from the user's home.
for pid in $(pgrep -u "$USER_NAME" -f "podman system service" || true); do
	case $(readlink "/proc/$pid/cwd" 2>/dev/null) in
	*" (deleted)")
		log "the podman service's working directory is gone; restarting it"
		stop
		break
		;;
	esac
done

if ! answers; then
	touch "$LOG" && chown "$USER_NAME" "$LOG"
	# A podman of an earlier boot left its state under the runtime dir.
	as podman system migrate >>"$LOG" 2>&1 || true
	as mkdir -p "$(dirname "$SOCK")"
	log "starting podman system service as $USER_NAME at $HOST (log: $LOG)"
	cd "$home" # the service's working directory outlives any checkout it was started from
	setsid nohup runuser -u "$USER_NAME" -- env -i HOME="$home" USER="$USER_NAME" LOGNAME="$USER_NAME" \
		PATH=/usr/local/bin:/usr/bin:/bin XDG_RUNTIME_DIR="$run_dir" \
		podman system service --time=0 "$HOST" </dev/null >>"$LOG" 2>&1 &
	echo $! >"$PIDFILE"
	await_daemon "podman system service at $HOST" $! "$LOG" 30
fi

for variant in bookworm nopython; do
	image=lathe.local/sandbox:$variant
	as podman image exists "$image" && continue
	if [ "$variant" = bookworm ]; then tarball=$("$here/build-image.sh"); else tarball=$("$here/build-image.sh" "$variant"); fi
	log "loading $image into $USER_NAME's podman storage"
	# The user reads the tarball through stdin: it need not read root's cache.
	as podman load -q <"$tarball" >>"$LOG"
	as podman image exists "$image" || die "podman load did not register $image"
done
echo "$HOST"
