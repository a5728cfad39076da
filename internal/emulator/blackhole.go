package emulator

import (
	"net"
	"sync"
	"testing"
)

// Blackhole starts a server on an ephemeral 127.0.0.1 port that accepts
// every connection and never answers nor closes it (until the test ends): an
// endpoint that went silent, a hung proxy. It returns its URL,
// http://127.0.0.1:PORT.
func Blackhole(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("blackhole: %v", err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		done  = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by Cleanup
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read nor written
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}
