//go:build !unix

package emulator

import (
	"context"
	"errors"
	"os"
	"os/exec"
)

// On systems without process groups and flock the launcher kills only the
// emulator process itself, and Install fails with errUnsupported, so emulator
// tests fail there unless skipped with BENTHOS_KINESIS_SKIP_EMULATORS=1.
var errUnsupported = errors.New("emulator: installing emulators needs a unix-like system (flock)")

func setProcessGroup(*exec.Cmd) {}

func killGroup(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return nil
	}
	if err := p.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	return nil
}

func processExists(int) bool { return false }

func lockFile(context.Context, string) (func(), error) { return nil, errUnsupported }
