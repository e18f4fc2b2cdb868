# Workbench targets. The main Makefile does `include web/web.mk`.
#   make browser-up   Chromium, node and the browser tests' node_modules
#   make vendor       rebuild web/vendor/dist from web/vendor/package-lock.json
# go build never needs either: the bundles are committed.

WEB_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
_web_default_goal := $(.DEFAULT_GOAL)

.PHONY: browser-up vendor

browser-up:
	@bash $(WEB_DIR)/browser-up.sh

vendor:
	@bash $(WEB_DIR)/vendor/build.sh

.DEFAULT_GOAL := $(_web_default_goal)
