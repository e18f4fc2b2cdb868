package core

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

func CheckIdentity(field, v string) error {
	if v == "" {
		return nil
	}
	if len(v) > maxTurnIDLen || !utf8.ValidString(v) || strings.TrimSpace(v) != v || strings.ContainsFunc(v, IsControl) {
		return fmt.Errorf("%w: %s must be 1-%d bytes of printable UTF-8 without surrounding spaces", ErrInvalid, field, maxTurnIDLen)
	}
	return nil
}

func IsControl(r rune) bool { return r < 0x20 || r == 0x7f }

// MaxNameLen bounds display names.
const MaxNameLen = 200

// CleanName trims a display name and rejects empty, overlong or
// control-character names, naming the field.
func CleanName(field, name string) (string, error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return "", fmt.Errorf("%w: %s must not be empty", ErrInvalid, field)
	case !utf8.ValidString(name):
		return "", fmt.Errorf("%w: %s must be valid UTF-8", ErrInvalid, field)
	case utf8.RuneCountInString(name) > MaxNameLen:
		return "", fmt.Errorf("%w: %s is longer than %d characters", ErrInvalid, field, MaxNameLen)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "", fmt.Errorf("%w: %s must not contain control characters", ErrInvalid, field)
	}
	return name, nil
}

const maxTurnIDLen = 128

const MaxModelName = 200
