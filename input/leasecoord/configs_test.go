package leasecoord

import (
	"reflect"
	"testing"

	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// TestMismatchedConfigsAreTheLiveOnesOfThisBuild: an instance reports the
// live instances of its group whose config differs from its own, and the
// parts that differ; not dead ones, not those of another build (a rolling
// upgrade may change defaults), not those that publish no digest.
func TestMismatchedConfigsAreTheLiveOnesOfThisBuild(t *testing.T) {
	mine := map[string]string{"build": "v1", "input": "i1", "output": "o1", "pipeline": "p1"}
	workers := []lease.Worker{
		{ID: "me", Config: mine},
		{ID: "same", Config: map[string]string{"build": "v1", "input": "i1", "output": "o1", "pipeline": "p1"}},
		{ID: "indexer", Config: map[string]string{"build": "v1", "input": "i1", "output": "o2", "pipeline": "p1"}},
		{ID: "extra-buffer", Config: map[string]string{"build": "v1", "input": "i1", "output": "o1", "pipeline": "p1", "buffer": "b1"}},
		{ID: "dead", Config: map[string]string{"build": "v1", "input": "i9", "output": "o9", "pipeline": "p9"}},
		{ID: "upgraded", Config: map[string]string{"build": "v2", "input": "i2", "output": "o2", "pipeline": "p2"}},
		{ID: "old", Config: nil},
	}
	live := map[string]bool{"me": true, "same": true, "indexer": true, "extra-buffer": true, "upgraded": true, "old": true}
	got := mismatched(mine, "me", workers, live)
	want := configMismatch{instances: []string{"extra-buffer", "indexer"}, parts: []string{"buffer", "output"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mismatch %+v, want %+v", got, want)
	}
	if got := mismatched(nil, "me", workers, live); len(got.instances) != 0 {
		t.Fatalf("an instance without a digest of its own reported %v", got)
	}
}
