package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kpl"
)

// The fake's streams: the same user records, plain in one, packed in KPL
// aggregates in the other.
const (
	streamPlain = "plain"
	streamKPL   = "kpl"
	consumer    = "bench"
)

type fakeConfig struct {
	records, shards, size, aggregate int
	set                              settings      // of the input's configuration
	outputDelay                      time.Duration // each batch's time in the input scenarios' output
	quotas                           bool          // AWS's read quotas (5 calls/s and 2 MiB/s per shard) on
}

// fake is the one fake Kinesis every scenario reads: TLS with HTTP/2 as AWS
// serves fan-out, quotas off (unless -quotas) so that only the reader sets the pace, and no
// 5-second subscription takeover window so that every run may subscribe
// again at once.
type fake struct {
	cfg       fakeConfig
	srv       *kinesisfake.Server
	shards    map[string][]string // stream -> shard ids
	consumers map[string]string   // stream -> consumer ARN
}

// newFake starts the fake and loads the streams the scenarios read.
func newFake(cfg fakeConfig, selected []scenario) (*fake, error) {
	streams := map[string]bool{}
	for _, s := range selected {
		streams[s.stream] = true
	}
	opts := []kinesisfake.Opt{kinesisfake.TLS(), kinesisfake.Quotas(cfg.quotas), kinesisfake.SubscribeTakeoverWindow(0)}
	for s := range streams {
		opts = append(opts, kinesisfake.Stream(s, cfg.shards))
	}
	srv, err := kinesisfake.New(opts...)
	if err != nil {
		return nil, err
	}
	f := &fake{cfg: cfg, srv: srv, shards: map[string][]string{}, consumers: map[string]string{}}
	for s := range streams {
		if err := f.load(s); err != nil {
			srv.Close()
			return nil, fmt.Errorf("loading stream %s: %w", s, err)
		}
		arn, err := srv.RegisterConsumer(s, consumer)
		if err != nil {
			srv.Close()
			return nil, err
		}
		f.consumers[s] = arn
	}
	return f, nil
}

func (f *fake) close() { f.srv.Close() }

// perShard is how many user records shard i holds: records spread evenly.
func (f *fake) perShard(i int) int {
	n := f.cfg.records / f.cfg.shards
	if i < f.cfg.records%f.cfg.shards {
		n++
	}
	return n
}

func (f *fake) load(stream string) error {
	listed, err := f.srv.Shards(stream)
	if err != nil {
		return err
	}
	buf := make([]byte, f.cfg.records*f.cfg.size)
	data := func(n int) []byte { // record n: its index, then filler
		d := buf[n*f.cfg.size : (n+1)*f.cfg.size : (n+1)*f.cfg.size]
		copy(d, strconv.Itoa(n))
		return d
	}
	first := 0
	for i, sh := range listed {
		id, n := *sh.ShardId, f.perShard(i)
		f.shards[stream] = append(f.shards[stream], id)
		if stream == streamPlain {
			err = f.srv.PutToShard(stream, id, n, func(j int) []byte { return data(first + j) })
		} else {
			err = f.loadAggregates(stream, sh, first, n, data)
		}
		if err != nil {
			return err
		}
		first += n
	}
	return nil
}

// loadAggregates packs n user records into aggregates as the KPL does: every
// user record's partition key hashes into the shard of its aggregate, so the
// input keeps them all.
func (f *fake) loadAggregates(stream string, sh types.Shard, first, n int, data func(int) []byte) error {
	keys, err := keysOf(sh, 16)
	if err != nil {
		return err
	}
	var aggs [][]byte
	for from := 0; from < n; from += f.cfg.aggregate {
		users := make([]kpl.UserRecord, min(f.cfg.aggregate, n-from))
		for i := range users {
			users[i] = kpl.UserRecord{PartitionKey: keys[(from+i)%len(keys)], Data: data(first + from + i)}
		}
		agg, err := kpl.Pack(users)
		if err != nil {
			return err
		}
		aggs = append(aggs, agg.Data)
	}
	return f.srv.PutToShard(stream, *sh.ShardId, len(aggs), func(i int) []byte { return aggs[i] })
}

// keysOf finds n partition keys that hash into the shard.
func keysOf(sh types.Shard, n int) ([]string, error) {
	r, err := kpl.ParseHashKeyRange(*sh.HashKeyRange.StartingHashKey, *sh.HashKeyRange.EndingHashKey)
	if err != nil {
		return nil, err
	}
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if pk := "user-" + strconv.Itoa(i); r.Contains(kpl.PartitionHashKey(pk)) {
			keys = append(keys, pk)
		}
	}
	return keys, nil
}

// quotaFake starts a fake with AWS's quotas on and one empty stream, its
// consumer registered: what the -latency and -idle modes read.
func quotaFake(cfg fakeConfig, stream string) (*fake, error) {
	srv, err := kinesisfake.New(kinesisfake.TLS(), kinesisfake.Stream(stream, cfg.shards), kinesisfake.Quotas(true), kinesisfake.ConsumerActivationDelay(0))
	if err != nil {
		return nil, err
	}
	if _, err := srv.RegisterConsumer(stream, consumer); err != nil {
		srv.Close()
		return nil, err
	}
	return &fake{cfg: cfg, srv: srv}, nil
}
