package emulator

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// npmPackage is an npm package pinned to an exact version.
type npmPackage struct {
	name    string
	version string
}

func (p npmPackage) spec() string { return p.name + "@" + p.version }

// The emulators this package runs, at the versions whose behaviour
// REFERENCE.md describes. Changing a version here makes the next test run
// reinstall (the stamp file no longer matches).
var (
	kinesisLocalPackage = npmPackage{name: "kinesis-local", version: "0.6.2"}
	dynalitePackage     = npmPackage{name: "dynalite", version: "4.0.0"}
	pinnedPackages      = []npmPackage{kinesisLocalPackage, dynalitePackage}
)

const (
	// stampName marks a finished install; it holds the installed specs.
	stampName = ".installed"
	// lockName serialises installs between processes.
	lockName = ".install.lock"
)

// installMu serialises installs within one process: flock does not exclude
// two descriptors of the same process from each other on every system.
var installMu sync.Mutex

// Install makes sure the pinned emulator packages are installed in [Dir],
// running `npm install` when they are not. It is safe to call from many
// processes at once: one installs while the others wait on a file lock and
// then find the work done. Nothing is downloaded when a previous install
// finished (a stamp file in Dir records it). ctx bounds the wait and npm.
func Install(ctx context.Context) error {
	dir, err := Dir()
	if err != nil {
		return err
	}
	return installInto(ctx, dir)
}

func installInto(ctx context.Context, dir string) error {
	installMu.Lock()
	defer installMu.Unlock()
	if isInstalled(dir) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("emulator: create install directory: %w", err)
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, lockName))
	if err != nil {
		return fmt.Errorf("emulator: lock %s: %w", filepath.Join(dir, lockName), err)
	}
	defer unlock()
	if isInstalled(dir) { // another process installed while we waited
		return nil
	}
	if err := npmInstall(ctx, dir); err != nil {
		return err
	}
	for _, p := range pinnedPackages {
		if err := checkPackageVersion(dir, p); err != nil {
			return fmt.Errorf("emulator: after npm install: %w", err)
		}
	}
	return writeFileAtomic(filepath.Join(dir, stampName), []byte(stampContent()))
}

func npmInstall(ctx context.Context, dir string) error {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("emulator: npm not found on PATH (%v): install Node.js 20 or newer, which includes npm, "+
			"to install %s into %s; or set %s=1 to skip emulator tests on purpose", err, specs(), dir, EnvSkip)
	}
	args := append([]string{"install", "--no-audit", "--no-fund", "--no-update-notifier", "--prefix", dir},
		strings.Fields(specs())...)
	cmd := exec.CommandContext(ctx, npm, args...)
	cmd.Dir = dir
	out := newTailBuffer(defaultTail)
	cmd.Stdout, cmd.Stderr = out, out
	// npm starts children of its own; on cancellation take them all down.
	setProcessGroup(cmd)
	cmd.Cancel = func() error { return killGroup(cmd.Process.Pid) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("emulator: npm %s: %w\nnpm output:\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

func specs() string {
	s := make([]string, len(pinnedPackages))
	for i, p := range pinnedPackages {
		s[i] = p.spec()
	}
	return strings.Join(s, " ")
}

func stampContent() string { return specs() + "\n" }

// isInstalled reports whether a finished install of exactly the pinned
// packages is in dir.
func isInstalled(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, stampName))
	if err != nil || string(b) != stampContent() {
		return false
	}
	for _, p := range pinnedPackages {
		if checkPackageVersion(dir, p) != nil {
			return false
		}
	}
	return true
}

func checkPackageVersion(dir string, p npmPackage) error {
	path := filepath.Join(packageDir(dir, p.name), "package.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("package %s: %w", p.name, err)
	}
	var meta struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		return fmt.Errorf("package %s: %s: %w", p.name, path, err)
	}
	if meta.Version != p.version {
		return fmt.Errorf("package %s: version %q installed, %q pinned", p.name, meta.Version, p.version)
	}
	return nil
}

// writeFileAtomic replaces path with data so that readers see either the old
// or the new content, never a part.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("emulator: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	err = tmp.Chmod(0o644)
	if err == nil {
		_, err = tmp.Write(data)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("emulator: write %s: %w", path, err)
	}
	return nil
}

// nodeBinary finds node on PATH and checks its version once per process.
var nodeBinary = sync.OnceValues(func() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", node, err)
	}
	v := string(bytes.TrimSpace(out))
	var major int
	if _, err := fmt.Sscanf(v, "v%d.", &major); err != nil {
		return "", fmt.Errorf("%s --version printed %q: %w", node, v, err)
	}
	if major < 20 {
		return "", fmt.Errorf("the emulators need Node.js 20 or newer, %s is %s", node, v)
	}
	return node, nil
})
