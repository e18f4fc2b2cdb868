# Workbench targets. The main Makefile does `include web/web.mk`.
#   make browser-up   Chromium, node and the browser tests' node_modules
#   make vendor       rebuild web/vendor/dist from web/vendor/package-lock.json
#   make screenshots  run the browser tests and keep their screens in docs/screenshots
# go build never needs either: the bundles are committed.

WEB_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))
_web_default_goal := $(.DEFAULT_GOAL)

.PHONY: browser-up vendor screenshots

browser-up:
	@bash $(WEB_DIR)/browser-up.sh

vendor:
	@bash $(WEB_DIR)/vendor/build.sh

# The README's screens: the browser tests save them when LATHE_SCREENSHOTS names a folder.
screenshots: browser-up
	LATHE_SCREENSHOTS=$(abspath $(WEB_DIR)/../docs/screenshots) CI=1 \
		go test -count=1 -run 'TestWorkbenchInChromium|TestConversationInChromium|TestScmAndPreviewInChromium|TestMCPInChromium|TestChatsInChromium|TestHistoryInChromium|TestTurnHistoryInChromium|TestAutomationsInChromium|TestLatticeInChromium|TestWaysInChromium|TestWalkLiveInChromium|TestWorktreeInChromium|TestRemoteInChromium|TestRemoteRetainedInChromium' ./cmd/lathe/internal/daemon/

.DEFAULT_GOAL := $(_web_default_goal)
