package emulator

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Environment variables read by this package.
const (
	// EnvDir overrides the directory the npm packages are installed into
	// (the npm prefix; packages end up in its node_modules folder).
	EnvDir = "BENTHOS_KINESIS_EMULATORS_DIR"
	// EnvSkip, when set to a true value ("1", "true"), makes every test that
	// needs an emulator skip with a reason instead of failing. Only for
	// developers who choose to; CI must leave it unset.
	EnvSkip = "BENTHOS_KINESIS_SKIP_EMULATORS"
)

// defaultDirRel is where the packages go, relative to the module root. It is
// outside every Go package directory, so the Go tool never looks into it.
const defaultDirRel = ".cache/emulators"

// Dir returns the npm prefix the emulator packages are installed into: the
// value of BENTHOS_KINESIS_EMULATORS_DIR made absolute when set, else
// .cache/emulators under the module root found by walking up from the working
// directory to go.mod. The directory need not exist yet.
func Dir() (string, error) {
	if d := os.Getenv(EnvDir); d != "" {
		abs, err := filepath.Abs(d)
		if err != nil {
			return "", fmt.Errorf("emulator: %s=%q: %w", EnvDir, d, err)
		}
		return abs, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("emulator: working directory: %w", err)
	}
	root, err := moduleRoot(wd)
	if err != nil {
		return "", fmt.Errorf("emulator: %w; run inside the module or set %s", err, EnvDir)
	}
	return filepath.Join(root, filepath.FromSlash(defaultDirRel)), nil
}

// moduleRoot returns the nearest directory at or above dir that holds go.mod.
func moduleRoot(dir string) (string, error) {
	dir = filepath.Clean(dir)
	for {
		_, err := os.Stat(filepath.Join(dir, "go.mod"))
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("looking for go.mod in %s: %w", dir, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod found in the working directory or above")
		}
		dir = parent
	}
}

// packageDir is the folder of an installed npm package under the prefix dir.
func packageDir(dir, name string) string {
	return filepath.Join(dir, "node_modules", name)
}
