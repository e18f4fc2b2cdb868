// Package sweeps collects what no event names any more: blobs left by
// uploads and offloaded content.
package sweeps
