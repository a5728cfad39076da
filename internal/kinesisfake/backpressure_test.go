package kinesisfake

import (
	"runtime"
	"testing"
	"time"
)

// liveSub returns the one live subscription of the server.
func liveSub(t *testing.T, s *Server) *subscription {
	t.Helper()
	var found *subscription
	must(t, s.do(func(st *state, _ time.Time) {
		for _, sm := range st.streams {
			for _, c := range sm.consumers {
				for _, sub := range c.subs {
					found = sub
				}
			}
		}
	}))
	if found == nil {
		t.Fatal("no live subscription")
	}
	return found
}

// A client that stops reading must not make the server buffer: the
// subscription's goroutine blocks in Write once HTTP/2 flow control (or TCP)
// is exhausted, so what it has written stays far below what there is to send,
// and everything still arrives, in order, once the client reads again.
func TestSubscriptionBackPressure(t *testing.T) {
	t.Parallel()
	const (
		recSize = 256 << 10
		recs    = 96 // 24 MiB in all
	)
	for _, mode := range []struct {
		name  string
		opts  []Opt
		limit int64
	}{
		// Go's HTTP/2 client window is 4 MiB per stream.
		{"tls-h2", []Opt{TLS()}, 8 << 20},
		// Loopback socket buffers can grow to several MiB each way.
		{"http1", nil, 16 << 20},
	} {
		t.Run(mode.name, func(t *testing.T) {
			s := newServer(t, append(mode.opts, Stream("s", 1), Quotas(false))...)
			c := newClient(s)
			arn, err := s.RegisterConsumer("s", "app")
			must(t, err)
			blob := make([]byte, recSize-2)
			must(t, s.PutToShard("s", "shardId-000000000000", recs, func(i int) []byte {
				b := append([]byte(nil), blob...)
				b[0] = byte(i)
				return b
			}))
			es, err := subscribe(t, c, arn, "shardId-000000000000", trimHorizon())
			must(t, err)

			// Read nothing; wait until the server stops making progress.
			sub := liveSub(t, s)
			var last int64 = -1
			stableSince := time.Now()
			waitFor(t, "writes to stall", 20*time.Second, func() bool {
				w := sub.written.Load()
				if w != last {
					last, stableSince = w, time.Now()
					return false
				}
				return time.Since(stableSince) > 300*time.Millisecond
			})
			written := sub.written.Load()
			t.Logf("server wrote %d MiB of %d MiB before blocking", written>>20, recs*recSize>>20)
			if written > mode.limit {
				t.Fatalf("server wrote %d bytes to a client that reads nothing", written)
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			t.Logf("heap in use %d MiB", ms.HeapInuse>>20)

			// Now read everything: nothing was lost while blocked.
			got := 0
			for got < recs {
				ev, _ := nextEvent(t, es, 10*time.Second)
				for _, r := range ev.Records {
					if r.Data[0] != byte(got) {
						t.Fatalf("record %d out of order", got)
					}
					got++
				}
			}
		})
	}
}

// Close ends every subscription, including one blocked in Write, and returns
// only when the server's goroutines are gone.
func TestCloseEndsSubscriptions(t *testing.T) {
	s, err := New(TLS(), Stream("s", 3), Quotas(false), SubscriptionHeartbeat(20*time.Millisecond))
	must(t, err)
	t.Cleanup(s.Close)
	c := newClient(s)
	arn, err := s.RegisterConsumer("s", "app")
	must(t, err)
	// Shard 0 has 16 MiB that nobody reads: its goroutine blocks in Write.
	blob := make([]byte, 1<<20-2)
	must(t, s.PutToShard("s", "shardId-000000000000", 16, func(int) []byte { return blob }))
	var streams []interface{ Err() error }
	for _, shard := range []string{"shardId-000000000000", "shardId-000000000001", "shardId-000000000002"} {
		es, err := subscribe(t, c, arn, shard, trimHorizon())
		must(t, err)
		streams = append(streams, es)
		if shard != "shardId-000000000000" {
			nextEvent(t, es, 2*time.Second)
		}
	}
	waitFor(t, "3 subscriptions", 5*time.Second, func() bool { return s.Subscriptions() == 3 })

	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	s.Close() // idempotent
	if _, _, err := s.Put("s", "k", []byte("x")); err != ErrClosed {
		t.Fatalf("Put after Close: %v", err)
	}
	if n := s.Subscriptions(); n != 0 {
		t.Fatalf("%d subscriptions after Close", n)
	}
}
