# Shared helpers for the sandbox scripts. Sourced, not run.
# shellcheck shell=bash

log() { printf '%s: %s\n' "${0##*/}" "$*" >&2; }
die() { log "error: $*"; exit 1; }

have() { case $1 in /*) [ -e "$1" ] ;; *) command -v "$1" >/dev/null 2>&1 ;; esac; }

# apt_ensure CMD PKG...: install PKGs from the OS packages unless CMD is on PATH
# (or, for an absolute path, exists). Runs `apt-get update` only when a first
# install attempt fails (missing or stale package lists). Uses the machine's own
# apt sources.
apt_ensure() {
	local cmd=$1; shift
	have "$cmd" && return 0
	[ "$(id -u)" = 0 ] || die "$cmd is missing and installing $* needs root"
	export DEBIAN_FRONTEND=noninteractive
	local opts=(-y -q -o Dpkg::Use-Pty=0 --no-install-recommends)
	local out
	out=$(mktemp)
	log "installing $* from apt"
	if ! apt-get install "${opts[@]}" "$@" >"$out" 2>&1; then
		if ! { apt-get update -q && apt-get install "${opts[@]}" "$@"; } >"$out" 2>&1; then
			tail -n 20 "$out" >&2
			rm -f "$out"
			die "apt-get install $* failed"
		fi
	fi
	rm -f "$out"
	have "$cmd" || die "$cmd still missing after installing $*"
}

# await_daemon NAME PID LOG SECONDS: wait until `answers` succeeds, failing
# with the log's tail if the daemon PID exits or SECONDS pass.
await_daemon() {
	local name=$1 pid=$2 logf=$3 secs=$4
	for _ in $(seq $((secs * 10))); do
		answers && return 0
		kill -0 "$pid" 2>/dev/null || { tail -n 20 "$logf" >&2; die "$name exited"; }
		sleep 0.1
	done
	answers || { tail -n 20 "$logf" >&2; die "$name did not answer within $secs s"; }
}
