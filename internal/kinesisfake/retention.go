package kinesisfake

import "time"

// Behavior: retention.
//
// AWS keeps a stream's records for its retention period (24 hours unless
// raised) and trims older ones, oldest first; TRIM_HORIZON then starts at the
// oldest record left. GetShardIterator or SubscribeToShard starting
// AT_SEQUENCE_NUMBER or AFTER_SEQUENCE_NUMBER of a trimmed record fails with
// InvalidArgumentException, whose message names the StartingSequenceNumber.
//
// The fake trims only when a test asks: TrimShard removes a shard's oldest
// records at once; time alone never trims, and retention is still reported as
// 24 hours. Choices where AWS is silent:
//
//   - Every sequence number at or before the newest trimmed record (the
//     shard's StartingSequenceNumber included) is past the horizon, except
//     that AFTER_SEQUENCE_NUMBER of the newest trimmed record itself is
//     accepted: it names the horizon exactly, nothing after it is gone, and
//     it is the ContinuationSequenceNumber that a subscription at the horizon
//     with no record left before it reports.
//   - A shard iterator or a live subscription positioned among trimmed
//     records goes on from the oldest record left.
//   - Trimming removes records, never shards; a closed shard whose records
//     are all trimmed is still listed.

// TrimShard removes the n oldest records left in a shard, as its retention
// period would (all of them if fewer are left), and returns how many it
// removed.
func (s *Server) TrimShard(stream, shardID string, n int) (int, error) {
	var removed int
	err := s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.lookupStream(streamRef{Name: stream})
		if err != nil {
			return err
		}
		sh, err := st.lookupShard(sm, shardID)
		if err != nil {
			return err
		}
		removed = min(max(n, 0), len(sh.records)-sh.trimmed)
		sh.trimmed += removed
		return nil
	})
	return removed, err
}

// pastHorizon reports whether a read starting at (after, when after is set)
// the record with the given sequence counter would start among trimmed
// records.
func (sh *shard) pastHorizon(counter uint64, after bool) bool {
	if sh.trimmed == 0 {
		return false
	}
	newest := sh.records[sh.trimmed-1].counter
	return counter < newest || (counter == newest && !after)
}
