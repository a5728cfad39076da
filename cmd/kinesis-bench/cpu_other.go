//go:build !unix

package main

import "time"

// processCPU is not measured on this platform: CPU figures read 0.
func processCPU() time.Duration { return 0 }
