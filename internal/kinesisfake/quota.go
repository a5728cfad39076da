package kinesisfake

import (
	"time"
)

// bucket is a token bucket: it refills at rate tokens per second up to burst.
// take spends whole requests; charge spends a measured amount after the fact
// and may leave the bucket in debt, which is how byte quotas work: a read is
// admitted while the budget is positive and then pays for what it returned.
type bucket struct {
	rate, burst float64
	tokens      float64
	last        time.Time
}

func newBucket(rate, burst float64, now time.Time) *bucket {
	return &bucket{rate: rate, burst: burst, tokens: burst, last: now}
}

func (b *bucket) refill(now time.Time) {
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens += dt * b.rate
		if b.tokens > b.burst {
			b.tokens = b.burst
		}
		b.last = now
	}
}

// take spends n tokens if there are that many.
func (b *bucket) take(now time.Time, n float64) bool {
	b.refill(now)
	if b.tokens < n {
		return false
	}
	b.tokens -= n
	return true
}

// positive reports whether the budget is above zero.
func (b *bucket) positive(now time.Time) bool {
	b.refill(now)
	return b.tokens > 0
}

// charge spends n tokens, going into debt if needed.
func (b *bucket) charge(now time.Time, n float64) {
	b.refill(now)
	b.tokens -= n
}

// waitFor returns how long until n tokens (at most a full burst) are there.
func (b *bucket) waitFor(now time.Time, n float64) time.Duration {
	b.refill(now)
	need := min(n, b.burst)
	if b.tokens >= need {
		return 0
	}
	return time.Duration((need - b.tokens) / b.rate * float64(time.Second))
}

// Quotas, from the AWS Kinesis Data Streams documentation.
const (
	mib = 1 << 20

	getRecordsTPS         = 5       // per shard
	getRecordsBytesPS     = 2 * mib // per shard, shared by all polling readers
	getShardIterTPS       = 5       // per shard
	subscribeTPS          = 1       // per consumer per shard
	subscribeBytesPS      = 2 * mib // per consumer per shard
	registerTPS           = 5       // per account
	maxCreating           = 5       // consumers CREATING at once, per account
	maxConsumers          = 20      // per stream
	maxConsumersAdvantage = 50      // per stream, with On-demand Advantage
	describeConsTPS       = 20      // per stream
	listConsumersTPS      = 5       // per stream
	deregisterTPS         = 5       // per account
	describeSummaryTPS    = 20      // per account
	describeStreamTPS     = 10      // per account
	listShardsTPS         = 1000    // per stream
	putRecordsPS          = 1000    // per shard
	putBytesPS            = 1 * mib // per shard
)

// limit spends one token of the TPS bucket named key when quotas are on; it
// reports false when the call must be throttled.
func (st *state) limit(key string, tps float64, now time.Time) bool {
	if !st.s.cfg.quotas {
		return true
	}
	return st.bucketFor(key, tps, tps, now).take(now, 1)
}
