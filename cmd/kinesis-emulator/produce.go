package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kpl"
)

// producer writes demo order events into a stream of the emulator at a
// steady rate; once a second a write is a KPL aggregate of several events,
// laid out as a producer using the Kinesis Producer Library writes them.
type producer struct {
	stream string
	rate   int // events per second
}

// parseProduce parses "orders:20" (stream:events per second).
func parseProduce(spec string) (*producer, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	name, rate, ok := strings.Cut(spec, ":")
	n, err := strconv.Atoi(rate)
	if !ok || name == "" || err != nil || n < 1 || n > 100000 {
		return nil, fmt.Errorf("%q is not stream:events_per_second (1 to 100000)", spec)
	}
	return &producer{stream: name, rate: n}, nil
}

type orderEvent struct {
	OrderID  int     `json:"order_id"`
	Customer string  `json:"customer"`
	Amount   float64 `json:"amount"`
	At       string  `json:"at"`
}

// aggregateSize is how many events a KPL aggregate of the demo holds.
const aggregateSize = 5

// run writes until ctx ends: rate events a second, in ten steps a second
// (the fraction carried over, so that the rate is exact over a second); the
// first write of every tenth step is a KPL aggregate of up to aggregateSize
// events, which count toward the rate like the others.
func (p *producer) run(ctx context.Context, srv *kinesisfake.Server, log *slog.Logger) {
	tick := time.NewTicker(time.Second / 10)
	defer tick.Stop()
	p.loop(ctx, srv, log, tick.C)
}

// loop is run with the ticks (ten a second) given.
func (p *producer) loop(ctx context.Context, srv *kinesisfake.Server, log *slog.Logger, ticks <-chan time.Time) {
	id := 0
	next := func(customer string) []byte {
		id++
		data, _ := json.Marshal(orderEvent{OrderID: id, Customer: customer, Amount: float64(rand.IntN(100000)) / 100, At: time.Now().UTC().Format(time.RFC3339Nano)})
		return data
	}
	due := 0.0 // events due and not yet written
	for tick := 0; ; tick++ {
		select {
		case <-ctx.Done():
			return
		case <-ticks:
		}
		due += float64(p.rate) / 10
		for first := true; due >= 1; first = false {
			var err error
			if n := min(aggregateSize, int(due)); first && tick%10 == 9 && n >= 2 {
				err = p.putAggregate(srv, n, next)
				due -= float64(n)
			} else {
				customer := randomCustomer()
				_, _, err = srv.Put(p.stream, customer, next(customer))
				due--
			}
			if err != nil {
				if ctx.Err() == nil {
					log.Error("producing demo records", "stream", p.stream, "err", err)
				}
				return
			}
		}
	}
}

func randomCustomer() string { return fmt.Sprintf("customer-%03d", rand.IntN(200)) }

// putAggregate writes n events as one KPL aggregated record, as the KPL
// lays them out: events of distinct partition keys that all map to one
// shard (the shard of the aggregate's own partition key, its first
// event's), each keeping its key.
func (p *producer) putAggregate(srv *kinesisfake.Server, n int, next func(string) []byte) error {
	first := randomCustomer()
	shardRange, err := p.rangeOf(srv, kpl.PartitionHashKey(first))
	if err != nil {
		return err
	}
	users := []kpl.UserRecord{{PartitionKey: first, Data: next(first)}}
	taken := map[string]bool{first: true}
	for len(users) < n {
		c := randomCustomer()
		if !taken[c] && shardRange.Contains(kpl.PartitionHashKey(c)) {
			taken[c] = true
			users = append(users, kpl.UserRecord{PartitionKey: c, Data: next(c)})
		}
	}
	agg, err := kpl.Pack(users)
	if err != nil {
		return err
	}
	_, _, err = srv.Put(p.stream, agg.PartitionKey, agg.Data)
	return err
}

// rangeOf returns the hash key range of the open shard that holds k.
func (p *producer) rangeOf(srv *kinesisfake.Server, k kpl.HashKey) (kpl.HashKeyRange, error) {
	shards, err := srv.Shards(p.stream)
	if err != nil {
		return kpl.HashKeyRange{}, err
	}
	for _, sh := range shards {
		if sh.SequenceNumberRange != nil && sh.SequenceNumberRange.EndingSequenceNumber != nil {
			continue // closed
		}
		r, err := kpl.ParseHashKeyRange(*sh.HashKeyRange.StartingHashKey, *sh.HashKeyRange.EndingHashKey)
		if err != nil {
			return kpl.HashKeyRange{}, err
		}
		if r.Contains(k) {
			return r, nil
		}
	}
	return kpl.HashKeyRange{}, fmt.Errorf("no open shard of stream %s holds hash key %s", p.stream, k)
}
