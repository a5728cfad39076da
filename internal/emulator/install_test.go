package emulator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestModuleRoot(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := moduleRoot(deep); err == nil {
		t.Fatal("found a module root without go.mod") // unless /tmp sits in a module
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := moduleRoot(deep)
	if err != nil || got != root {
		t.Fatalf("moduleRoot = %q, %v; want %q", got, err, root)
	}
}

func TestDirDefaultsUnderModuleRoot(t *testing.T) {
	t.Setenv(EnvDir, "")
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	want := filepath.Join(filepath.Dir(filepath.Dir(wd)), ".cache", "emulators") // internal/emulator -> root
	if dir != want {
		t.Fatalf("Dir() = %q, want %q", dir, want)
	}
}

func TestDirOverride(t *testing.T) {
	t.Setenv(EnvDir, "relative/emulators")
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	if !filepath.IsAbs(dir) || !strings.HasSuffix(dir, filepath.Join("relative", "emulators")) {
		t.Fatalf("Dir() = %q, want an absolute path ending in relative/emulators", dir)
	}
}

// TestIsInstalled covers the check that lets every test after the first
// start without npm: it needs the stamp and the pinned versions.
func TestIsInstalled(t *testing.T) {
	dir := t.TempDir()
	writePkg := func(p npmPackage, version string) {
		d := packageDir(dir, p.name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		body := `{"name":"` + p.name + `","version":"` + version + `"}`
		if err := os.WriteFile(filepath.Join(d, "package.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pinnedPackages {
		writePkg(p, p.version)
	}
	if isInstalled(dir) {
		t.Fatal("installed without a stamp (an interrupted install)")
	}
	if err := writeFileAtomic(filepath.Join(dir, stampName), []byte(stampContent())); err != nil {
		t.Fatal(err)
	}
	if !isInstalled(dir) {
		t.Fatal("not installed with stamp and pinned versions")
	}
	writePkg(dynalitePackage, "3.2.2")
	if isInstalled(dir) {
		t.Fatal("installed with a dynalite version other than the pinned one")
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	b := newTailBuffer(8)
	if got := b.String(); got != "(no output)" {
		t.Fatalf("empty: %q", got)
	}
	_, _ = b.Write([]byte("abc"))
	if got := b.String(); got != "abc" {
		t.Fatalf("got %q", got)
	}
	_, _ = b.Write([]byte("defghij"))
	if got := b.String(); got != "[...]cdefghij" {
		t.Fatalf("got %q", got)
	}
	_, _ = b.Write([]byte("0123456789"))
	if got := b.String(); got != "[...]23456789" {
		t.Fatalf("got %q", got)
	}
}
