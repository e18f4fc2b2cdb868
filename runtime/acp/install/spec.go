package install

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrSpec is the class of a package spec that is not name@exact-version.
var ErrSpec = errors.New("not a pinned npm package spec (name@exact-version)")

// maxSpecLen bounds a spec: npm's 214 for the name, and a version.
const maxSpecLen = 214 + 1 + 64

// namePart is one part of an npm package name (npm's validate-npm-package-name
// for new packages: lower case, URL-safe, not starting with . or _).
var namePart = regexp.MustCompile(`^[a-z0-9~-][a-z0-9._~-]*$`)

// exactVersion is semver.org's grammar for one version, without build
// metadata (npm ignores it, so two specs would name one install).
var exactVersion = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?$`)

// Package is a parsed pinned spec.
type Package struct {
	Name    string // "@scope/name" or "name"
	Version string // exact: "1.2.3" or "1.2.3-rc.1"
}

// String is the spec, name@version; it is also the install's directory name.
func (p Package) String() string { return p.Name + "@" + p.Version }

// ParseSpec reads name@exact-version. Anything npm would resolve elsewhere
// or later (a tag, a range, a URL, git, a file: or alias spec) is refused.
func ParseSpec(spec string) (Package, error) {
	if len(spec) > maxSpecLen {
		return Package{}, fmt.Errorf("%w: longer than %d characters", ErrSpec, maxSpecLen)
	}
	at := strings.LastIndexByte(spec, '@')
	if at <= 0 {
		return Package{}, fmt.Errorf("%w: %q has no @version", ErrSpec, spec)
	}
	name, version := spec[:at], spec[at+1:]
	if err := checkName(name); err != nil {
		return Package{}, fmt.Errorf("%w: %v", ErrSpec, err)
	}
	if !exactVersion.MatchString(version) {
		return Package{}, fmt.Errorf("%w: %q is not an exact version such as 1.2.3", ErrSpec, version)
	}
	return Package{Name: name, Version: version}, nil
}

func checkName(name string) error {
	if len(name) > 214 {
		return errors.New("the name is longer than 214 characters")
	}
	parts := []string{name}
	if scope, rest, ok := strings.Cut(name, "/"); ok {
		if !strings.HasPrefix(scope, "@") {
			return fmt.Errorf("%q: only a scoped name (@scope/name) has a /", name)
		}
		parts = []string{scope[1:], rest}
	}
	for _, p := range parts {
		if !namePart.MatchString(p) || p == "node_modules" || p == "favicon.ico" {
			return fmt.Errorf("%q is not an npm package name", name)
		}
	}
	return nil
}
