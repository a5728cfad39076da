package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// buildBinary builds this command into a temporary directory, once per test
// binary.
var buildBinary = sync.OnceValues(func() (string, error) { return goBuild(".", "benthos-kinesis") })

// built lists the directories goBuild made; TestMain removes them.
var built struct {
	sync.Mutex
	dirs []string
}

// goBuild builds the package pkg (without the race detector) into a new
// temporary directory as name.
func goBuild(pkg, name string) (string, error) {
	dir, err := os.MkdirTemp("", "benthos-kinesis-"+name+"-")
	if err != nil {
		return "", err
	}
	built.Lock()
	built.dirs = append(built.dirs, dir)
	built.Unlock()
	bin := filepath.Join(dir, name)
	cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, pkg)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin, nil
}

// TestMain removes what goBuild built once every test has ended (their
// cleanups have stopped the processes run from it).
func TestMain(m *testing.M) {
	code := m.Run()
	built.Lock()
	for _, dir := range built.dirs {
		os.RemoveAll(dir)
	}
	built.Unlock()
	os.Exit(code)
}
