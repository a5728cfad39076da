//go:build !unix

package checkpoint

import "os"

// lockFile is a no-op where flock is not available: the single-instance rule
// of the local store is then the user's to keep.
func lockFile(path string) (*os.File, error) { return nil, nil }

func unlockFile(*os.File) error { return nil }

func syncDir(string) error { return nil }

func openNonBlocking(path string) (*os.File, error) { return os.Open(path) }
