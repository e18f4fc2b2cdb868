package helper_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lathe/runtime/sandbox/helper"
	"lathe/runtime/sandbox/helper/helpertest"
)

// TestOpen: a static build opens; a dynamically linked program, and what
// is no executable, are refused as ErrBinary with what to do.
func TestOpen(t *testing.T) {
	b, err := helper.Open(helpertest.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	if b.Arch == "" {
		t.Error("no architecture")
	}
	_, err = helper.Open("/bin/true") // Debian's: dynamically linked
	if !errors.Is(err, helper.ErrBinary) || !strings.Contains(err.Error(), "dynamically linked") || !strings.Contains(err.Error(), "make build") {
		t.Errorf("a dynamic program: %v, want ErrBinary naming `make build`", err)
	}
	text := filepath.Join(t.TempDir(), "lathe")
	os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755)
	if _, err := helper.Open(text); !errors.Is(err, helper.ErrBinary) {
		t.Errorf("a script: %v, want ErrBinary", err)
	}
}

// TestStage: the staged binary is the build's, replaced whole when the
// build changes and left alone when it does not.
func TestStage(t *testing.T) {
	b, err := helper.Open(helpertest.Path(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "helper")
	staged, err := helper.Stage(b, dir)
	if err != nil {
		t.Fatal(err)
	}
	if staged.Path != filepath.Join(dir, "lathe") {
		t.Errorf("staged at %s", staged.Path)
	}
	first, _ := os.Stat(staged.Path)
	if _, err := helper.Stage(b, dir); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Stat(staged.Path); !os.SameFile(first, again) {
		t.Error("an unchanged build was staged again")
	}
	// Another build: a copy with one byte more (still a static ELF).
	other := filepath.Join(t.TempDir(), "lathe")
	data, err := os.ReadFile(b.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(other, append(data, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	ob, err := helper.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := helper.Stage(ob, dir); err != nil {
		t.Fatal(err)
	}
	got, _ := helper.Open(staged.Path)
	want, _ := ob.Hash()
	if h, _ := got.Hash(); h != want {
		t.Errorf("after another build: content %s, want %s", h, want)
	}
}
