#!/usr/bin/env bash
# Runs the remote provider's tests as an ordinary user on rootless Podman:
# the driver contract (runtime/sandbox/docker, sandboxtest's suite) and the
# daemon's remote Sessions (turns, files, terminals, Git, the Preview, sync,
# close, the leak checks, the remote browser tests), with the daemon under
# test running as that user. podman-up.sh makes the user and its engine.
# The test binaries and a static lathe (the sandbox helper, and the binary
# the process tests start) are built here, as root, with the Go toolchain's
# caches; the user runs them from the package dirs with only its own
# environment: $LATHE_DOCKER its socket, $LATHE_TEST_BIN the lathe build,
# CI set so that a missing engine fails instead of skipping.
#
#   LATHE_PODMAN_USER   the ordinary user   lathe-rootless
#   GO                  the go command      go
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$here/lib.sh"
root=$(cd "$here/../.." && pwd)
GO=${GO:-go}
USER_NAME=${LATHE_PODMAN_USER:-lathe-rootless}
export LATHE_PODMAN_USER=$USER_NAME

host=$(bash "$here/podman-up.sh")
uid=$(id -u "$USER_NAME")
home=$(getent passwd "$USER_NAME" | cut -d: -f6)

# prune: drop the volumes no container uses. Each test's daemon has an
# owner of its own, and each owner its own copy of the helper (a volume of
# the lathe binary's size, 140 MB): a run leaves about fifty.
prune() {
	runuser -u "$USER_NAME" -- env -i HOME="$home" PATH=/usr/bin:/bin XDG_RUNTIME_DIR="/run/user/$uid" \
		podman volume prune --force >/dev/null || log "could not prune $USER_NAME's podman volumes"
}
bin=$(mktemp -d /tmp/lathe-test-podman.XXXXXX)
trap 'rm -rf "$bin"; prune' EXIT
chmod 755 "$bin"
prune

# package and the tests of it that use the remote provider.
tests=(
	"runtime/sandbox/docker" "."
	"cmd/lathe/internal/daemon" "^(TestRemote|TestNoPythonRemoteSession$|TestRuntimeConnRemote$)"
	"cmd/lathe" "^TestRemote"
)
(cd "$root" && CGO_ENABLED=0 "$GO" build -o "$bin/lathe" ./cmd/lathe)
for ((i = 0; i < ${#tests[@]}; i += 2)); do
	pkg=${tests[i]}
	(cd "$root" && "$GO" test -c -race -o "$bin/${pkg//\//_}.test" "./$pkg")
done

failed=0
for ((i = 0; i < ${#tests[@]}; i += 2)); do
	pkg=${tests[i]} run=${tests[i + 1]}
	log "$pkg as $USER_NAME on $host"
	start=$SECONDS
	if (cd "$root/$pkg" && runuser -u "$USER_NAME" -- env -i HOME="$home" USER="$USER_NAME" LOGNAME="$USER_NAME" \
		PATH=/usr/local/bin:/usr/bin:/bin XDG_RUNTIME_DIR="/run/user/$uid" CI=1 \
		LATHE_DOCKER="$host" LATHE_TEST_BIN="$bin/lathe" \
		"$bin/${pkg//\//_}.test" -test.count=1 -test.timeout 15m -test.run "$run"); then
		log "ok $pkg ($((SECONDS - start)) s)"
	else
		log "FAIL $pkg"
		failed=1
	fi
done
exit $failed
