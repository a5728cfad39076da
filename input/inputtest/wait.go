package inputtest

import (
	"testing"
	"time"
)

// WaitUntil fails the test unless cond becomes true within the time given;
// it looks every 10 ms. This is the one way the tests wait on a condition.
func WaitUntil(t testing.TB, within time.Duration, cond func() bool) {
	t.Helper()
	if !Eventually(within, cond) {
		t.Fatalf("condition not met within %v", within)
	}
}

// Eventually reports whether cond became true within the time given.
func Eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}
