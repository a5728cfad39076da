package leasecoord

import (
	"reflect"
	"testing"

	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// TestMismatchedConfigsAreTheLiveOnes: an instance reports the live
// instances of its group whose config differs from its own, whatever their
// build (a copy deployed later from a newer image is still a copy), and
// the parts that differ; not dead ones, not those that publish no digest,
// not those that differ by build only (a rolling upgrade).
func TestMismatchedConfigsAreTheLiveOnes(t *testing.T) {
	mine := map[string]string{"build": "v1", "input": "i1", "output": "o1", "pipeline": "p1"}
	workers := []lease.Worker{
		{ID: "me", Config: mine},
		{ID: "same", Config: map[string]string{"build": "v1", "input": "i1", "output": "o1", "pipeline": "p1"}},
		{ID: "indexer", Config: map[string]string{"build": "v1", "input": "i1", "output": "o2", "pipeline": "p1"}},
		{ID: "extra-buffer", Config: map[string]string{"build": "v1", "input": "i1", "output": "o1", "pipeline": "p1", "buffer": "b1"}},
		{ID: "dead", Config: map[string]string{"build": "v1", "input": "i9", "output": "o9", "pipeline": "p9"}},
		{ID: "upgraded", Config: map[string]string{"build": "v2", "input": "i1", "output": "o1", "pipeline": "p1"}},
		{ID: "newer-copy", Config: map[string]string{"build": "v2", "input": "i1", "output": "o3", "pipeline": "p1"}},
		{ID: "old", Config: nil},
	}
	live := map[string]bool{"me": true, "same": true, "indexer": true, "extra-buffer": true, "upgraded": true, "newer-copy": true, "old": true}
	got := mismatched(mine, "me", workers, live)
	want := configMismatch{instances: []string{"extra-buffer", "indexer", "newer-copy"}, parts: []string{"buffer", "output"}, otherBuilds: []string{"newer-copy"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mismatch %+v, want %+v", got, want)
	}
	if got := mismatched(nil, "me", workers, live); len(got.instances) != 0 {
		t.Fatalf("an instance without a digest of its own reported %v", got)
	}
}
