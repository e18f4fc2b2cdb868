// Package web holds the browser workbench the daemon embeds and serves: the
// document (index.html), its ES modules and styles (ui/), brand assets
// (brand/) and the vendored third-party bundles (vendor/dist/, built by
// vendor/build.sh and committed, so that go build never needs npm).
package web

import "embed"

// Assets is the embedded asset tree. index.html is the document served at /;
// ui/, brand/ and vendor/dist/ are served under /ui/, /brand/ and /vendor/,
// lattice/ (the web components, such as the graph) under /lattice/.
//
//go:embed index.html ui brand vendor/dist lattice
var Assets embed.FS
