# Sandbox runtime targets. The main Makefile does `include runtime/sandbox/sandbox.mk`.
#   make containerd-up   containerd serving $LATHE_CONTAINERD, sandbox images imported
#   make docker-up       a Docker Engine at $LATHE_DOCKER on that containerd, images loaded
#   make sandbox-image   build (once, cached) the lathe.local/sandbox:bookworm OCI tarball
#   make podman-up       rootless Podman for the ordinary user lathe-rootless, images loaded
#   make test-podman     the remote provider's tests as that user on its Podman
# All are idempotent and fast when already done; see the scripts for the knobs.

SANDBOX_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
# Including this file never changes the includer's default goal.
_sandbox_default_goal := $(.DEFAULT_GOAL)

.PHONY: containerd-up docker-up sandbox-image podman-up test-podman

containerd-up:
	@bash $(SANDBOX_DIR)/containerd-up.sh

docker-up: containerd-up
	@bash $(SANDBOX_DIR)/docker-up.sh

podman-up:
	@bash $(SANDBOX_DIR)/podman-up.sh >/dev/null

# The remote browser tests among them need browser-up's node_modules.
test-podman: browser-up
	@bash $(SANDBOX_DIR)/test-podman.sh

sandbox-image:
	@bash $(SANDBOX_DIR)/build-image.sh >/dev/null

.DEFAULT_GOAL := $(_sandbox_default_goal)
