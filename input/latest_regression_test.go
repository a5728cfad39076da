package input

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestLatestIsPinnedWhenTheStreamIsFirstSeen: start_from latest means the
// records written after the input first saw the stream. Before the fix the
// time was taken at the first successful shard listing, so with the first
// ListShards calls throttled, the records written in between were never
// read.
func TestLatestIsPinnedWhenTheStreamIsFirstSeen(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 2))
	if _, _, err := srv.Put("orders", "k", []byte("before")); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	want := inputtest.Produced{}
	failed := 0
	remove := srv.Control("ListShards", func(*kinesisfake.Request) (bool, int, []byte) {
		mu.Lock()
		defer mu.Unlock()
		if failed == 3 {
			return false, 0, nil
		}
		// The stream has been described: what is written now is after it.
		data := fmt.Sprintf("during-%d", failed)
		if _, _, err := srv.Put("orders", fmt.Sprint("key-", failed), []byte(data)); err != nil {
			t.Error(err)
		}
		want[data] = fmt.Sprint("key-", failed)
		failed++
		status, body := kinesisfake.ErrorBody("LimitExceededException", "Rate exceeded for stream orders.")
		return true, status, body
	})
	defer remove()

	conf := strings.Replace(fakeInput(srv, "orders", t.TempDir(), "reader: polling\nshard_discovery_interval: 1s"),
		"start_from: trim_horizon", "start_from: latest", 1)
	out := &inputtest.Collector{}
	p := inputtest.StartPipeline(t, conf, out)
	waitUntil(t, 30*time.Second, func() bool { mu.Lock(); defer mu.Unlock(); return failed == 3 })
	mu.Lock()
	n := len(want)
	mu.Unlock()
	p.StopWhen(t, out, n, 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	inputtest.CheckDelivery(t, out.All(), want, true)
}
