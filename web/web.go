// Package web holds the browser assets the daemon embeds and serves.
package web

import "embed"

// Assets is the embedded asset tree. index.html is the document served at /.
//
//go:embed index.html
var Assets embed.FS
