package preview

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
)

// PickerPath is where a Preview origin serves the picker bridge. The
// daemon answers it itself; it shadows any app file of that name.
const PickerPath = "/.lathe/preview-picker.js"

// LegacyPickerName is the picker bridge's name under the legacy path
// proxy: /api/sessions/<id>/proxy/<port>/lathe-tap.js.
const LegacyPickerName = "lathe-tap.js"

// PickerJS is the picker bridge, a dependency-free script; its header
// comment documents the postMessage protocol and its origin rules.
//
//go:embed picker.js
var PickerJS []byte

// PickerETag is the strong entity tag of PickerJS.
var PickerETag = func() string {
	sum := sha256.Sum256(PickerJS)
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}()
