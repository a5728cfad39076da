package read

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/awsclient"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/polling"
)

// TestStreamSwitchedBetweenPlacementsWhileRead: an on-demand stream is read
// while it places records by partition key, then by itself (AUTO), then by
// key again. Every user record of the aggregates written in each phase
// arrives once; while records are placed by key, exactly the user records
// whose key hashes outside their shard's range are flagged; while the
// stream places them itself, none is, though most lie outside (a check
// there would flag nearly every aggregate of a KPL producer, and KCL drops
// such user records).
func TestStreamSwitchedBetweenPlacementsWhileRead(t *testing.T) {
	t.Parallel()
	srv := inputtest.NewFake(t, kinesisfake.Stream("orders", 4, kinesisfake.OnDemand()))
	client := srv.NewClient()
	store, err := checkpoint.OpenFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	h := startStreamHarnessWith(t, srv, store, func(c *kinesis.Client) Publisher {
		return polling.New(c, srv.StreamARN("orders"), polling.Options{})
	}, func(c *StreamConfig) {
		c.Describe = func(ctx context.Context) (awsclient.Stream, error) {
			return awsclient.DescribeStream(ctx, client, awsclient.StreamRef{Name: "orders"}, "the fake", "field streams")
		}
	}, discoverEvery(20*time.Millisecond), func(e *Env) { e.Limits.Placement = 0 })

	want := 0
	phase := func(prefix string, style inputtest.AggregateStyle, flagged bool) {
		t.Helper()
		prod := inputtest.ProduceAggregated(t, client, "orders", prefix, inputtest.AggregateMix{Aggregates: 16, MinUsers: 20, MaxUsers: 20, Plain: 8, Style: style, Seed: uint64(len(prefix) + want)})
		want += len(prod.Users)
		inputtest.WaitUntil(t, 30*time.Second, func() bool { return len(h.data()) >= want })
		var outside, wantFlags, gotFlags []string
		for d, p := range prod.Placed {
			if p.OutOfRange {
				outside = append(outside, d)
			}
		}
		if len(outside) == 0 {
			t.Fatalf("phase %s: no user record lies outside its shard's range: the phase shows nothing", prefix)
		}
		if flagged {
			wantFlags = outside
		}
		for _, d := range h.outOfRange() {
			if strings.HasPrefix(d, prefix+"-") {
				gotFlags = append(gotFlags, d)
			}
		}
		slices.Sort(wantFlags)
		slices.Sort(gotFlags)
		if !slices.Equal(gotFlags, wantFlags) {
			t.Errorf("phase %s (placed by key: %v): %d user records flagged out of range, want %d (of %d outside their shard's range)", prefix, flagged, len(gotFlags), len(wantFlags), len(outside))
		}
	}

	phase("bykey", inputtest.MixedKeysStyle, true)
	if err := srv.SetRecordDistribution("orders", "AUTO"); err != nil {
		t.Fatal(err)
	}
	inputtest.WaitUntil(t, 10*time.Second, h.s.placement.auto.Load)
	phase("auto", inputtest.KPLStyle, false)
	if err := srv.SetRecordDistribution("orders", "USER_PARTITION_KEY"); err != nil {
		t.Fatal(err)
	}
	inputtest.WaitUntil(t, 10*time.Second, func() bool { return !h.s.placement.auto.Load() })
	phase("again", inputtest.MixedKeysStyle, true)

	got := h.data()
	seen := map[string]bool{}
	for _, d := range got {
		if seen[d] {
			t.Errorf("%s delivered twice", d)
		}
		seen[d] = true
	}
	if len(got) != want {
		t.Errorf("%d records delivered, %d written", len(got), want)
	}
}
