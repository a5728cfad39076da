package leasecoord

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/input/coord"
	"github.com/benthos-kinesis/benthos-kinesis/input/lease"
)

// brokenRepeat is how often an item that is still broken is reported
// again: an operator who missed the first report sees the next one.
const brokenRepeat = coord.ReportAgain

// brokenItems is what a coordinator knows of the items of its stream that
// are not well-formed shard items: the shards they name are neither taken
// nor created nor read, and each item is reported at ERROR when first seen,
// when it changes, and every brokenRepeat while it stays. Owned by the
// stream's run loop (load, pin, cycle).
type brokenItems struct {
	// found holds the broken items of the last scan and of the items met
	// when pinning (a foreign item at a shard's key is not of the stream,
	// so no scan sees it), by leaseKey.
	found map[string]lease.BrokenItem
	// scan holds those of the last scan, pinned those met when pinning,
	// by leaseKey.
	scan, pinned map[string]lease.BrokenItem
	// reported holds, by leaseKey, the message last reported and when.
	reported map[string]brokenReport
}

type brokenReport struct {
	msg string
	at  time.Time
}

func newBrokenItems() *brokenItems {
	return &brokenItems{found: map[string]lease.BrokenItem{}, scan: map[string]lease.BrokenItem{}, pinned: map[string]lease.BrokenItem{}, reported: map[string]brokenReport{}}
}

// pinFailed takes in the error of creating shard id's item: it reports
// whether the error was a malformed item at its key (which is then broken).
func (b *brokenItems) pinFailed(id string, err error) bool {
	var mal *lease.MalformedItemError
	if !errors.As(err, &mal) {
		return false
	}
	b.pinned[mal.Key] = lease.BrokenItem{Key: mal.Key, ShardID: id, Err: err}
	return true
}

// pinDone forgets what pinning shard id met: its item is well-formed.
func (b *brokenItems) pinDone(id string) {
	for k, it := range b.pinned {
		if it.ShardID == id {
			delete(b.pinned, k)
		}
	}
}

// scanned replaces the broken items by those of a scan (and those met when
// pinning), and returns the ones due to be reported at now.
func (b *brokenItems) scanned(sc lease.Scan, now time.Time) []lease.BrokenItem {
	found := maps.Clone(b.pinned)
	b.scan = map[string]lease.BrokenItem{}
	for _, it := range sc.Broken {
		found[it.Key] = it
		b.scan[it.Key] = it
	}
	b.found = found
	var due []lease.BrokenItem
	for _, key := range slices.Sorted(maps.Keys(found)) {
		it := found[key]
		msg := it.Err.Error()
		if r, ok := b.reported[key]; ok && r.msg == msg && now.Sub(r.at) < brokenRepeat {
			continue
		}
		b.reported[key] = brokenReport{msg: msg, at: now}
		due = append(due, it)
	}
	for key := range b.reported {
		if _, ok := found[key]; !ok {
			delete(b.reported, key)
		}
	}
	return due
}

// shard reports whether a shard has a broken item.
func (b *brokenItems) shard(id string) bool {
	for _, it := range b.found {
		if it.ShardID == id {
			return true
		}
	}
	return false
}

// scannedShard reports whether the last scan found a broken item of a shard.
// (One met when pinning is not in any scan: pinning tries it again.)
func (b *brokenItems) scannedShard(id string) bool {
	for _, it := range b.scan {
		if it.ShardID == id {
			return true
		}
	}
	return false
}

// shards is the number of shards with a broken item.
func (b *brokenItems) shards() int {
	ids := map[string]bool{}
	for _, it := range b.found {
		if it.ShardID != "" {
			ids[it.ShardID] = true
		}
	}
	return len(ids)
}
