package input

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/polling"
)

// TestParentPastRetentionDoesNotBlockChildren: a closed parent shard
// that is still being read when it passes the retention period (the input was
// down for most of a day, or is far behind) disappears from ListShards and
// answers ResourceNotFoundException. Its records are gone; its children's
// records are not, yet, and expire in turn if they are not read.
//
// Before the fix, parentsEnded treated a parent no longer listed as gone, but
// discover keeps every shard that has a running reader in s.shards ("being
// read: not gone yet"), and the parent's reader never stops: shardReader.publish
// retries the fatal ResourceNotFound forever (with a backoff of up to 2 min).
// So the children are never read: a permanent, silent-but-for-logs stall that
// turns into further loss when the children's records expire.
func TestParentPastRetentionDoesNotBlockChildren(t *testing.T) {
	t.Parallel()
	srv := newFake(t, kinesisfake.Stream("orders", 1))
	const parent = "shardId-000000000000"
	if _, _, err := srv.Put("orders", "k", []byte("old")); err != nil {
		t.Fatal(err)
	}
	children, err := srv.SplitShard("orders", parent, "")
	if err != nil {
		t.Fatal(err)
	}
	shards, err := srv.Shards("orders")
	if err != nil {
		t.Fatal(err)
	}
	// The listing once the parent has passed the retention period.
	type hk struct{ StartingHashKey, EndingHashKey string }
	type sn struct{ StartingSequenceNumber string }
	type sh struct {
		ShardId             string
		ParentShardId       string `json:",omitempty"`
		HashKeyRange        hk
		SequenceNumberRange sn
	}
	var listing struct{ Shards []sh }
	for _, s := range shards {
		if aws.ToString(s.ShardId) == parent {
			continue
		}
		listing.Shards = append(listing.Shards, sh{
			ShardId: aws.ToString(s.ShardId), ParentShardId: aws.ToString(s.ParentShardId),
			HashKeyRange:        hk{aws.ToString(s.HashKeyRange.StartingHashKey), aws.ToString(s.HashKeyRange.EndingHashKey)},
			SequenceNumberRange: sn{aws.ToString(s.SequenceNumberRange.StartingSequenceNumber)},
		})
	}
	expiredListing, _ := json.Marshal(listing)

	var expired atomic.Bool
	expired.Store(true) // already past retention when the input (re)starts reading it
	var mu sync.Mutex
	childReads := 0
	srv.Control("ListShards", func(*kinesisfake.Request) (bool, int, []byte) {
		if expired.Load() {
			return true, 200, expiredListing
		}
		return false, 0, nil
	})
	srv.Control("GetShardIterator", func(r *kinesisfake.Request) (bool, int, []byte) {
		var in struct{ ShardId string }
		json.Unmarshal(r.Body, &in)
		if in.ShardId == parent {
			status, body := kinesisfake.ErrorBody("ResourceNotFoundException", "Shard "+parent+" does not exist")
			return true, status, body
		}
		mu.Lock()
		childReads++
		mu.Unlock()
		return false, 0, nil
	})
	// The parent is known and unfinished: a checkpoint from before the outage.
	expired.Store(false)
	store := mustOpenStore(t)
	h := startStreamHarnessWith(t, srv, "shard_discovery_interval: 1s", store, func(in *kinesisInput, client *kinesis.Client) recordPublisher {
		return polling.New(client, srv.StreamARN("orders"), polling.Options{})
	})
	waitUntil(t, 10*time.Second, func() bool {
		h.s.pos.mu.Lock()
		defer h.s.pos.mu.Unlock()
		_, ok := h.s.pos.state.Shards[parent]
		return ok
	})
	expired.Store(true) // the parent passes the retention period
	read := eventually(time.Minute, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return childReads > 0
	})
	if !read {
		t.Fatalf("the parent %s is gone (not listed, ResourceNotFound) but its children %v were never read in a minute: its reader keeps it 'running', so it is never pruned and parentsEnded waits for it forever", parent, children)
	}
}
