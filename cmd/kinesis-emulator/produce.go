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
// steady rate; every tenth write is a KPL aggregate of several events, as a
// producer using the Kinesis Producer Library would write them.
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

// run writes until ctx ends.
func (p *producer) run(ctx context.Context, srv *kinesisfake.Server, log *slog.Logger) {
	tick := time.NewTicker(time.Second / 10)
	defer tick.Stop()
	perTick := max(1, p.rate/10)
	id := 0
	next := func() (string, []byte) {
		id++
		customer := fmt.Sprintf("customer-%03d", rand.IntN(200))
		data, _ := json.Marshal(orderEvent{OrderID: id, Customer: customer, Amount: float64(rand.IntN(100000)) / 100, At: time.Now().UTC().Format(time.RFC3339Nano)})
		return customer, data
	}
	for writes := 0; ; writes++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for range perTick {
			var err error
			if writes%10 == 9 {
				err = p.putAggregate(srv, next)
			} else {
				pk, data := next()
				_, _, err = srv.Put(p.stream, pk, data)
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

// putAggregate writes five events as one KPL aggregated record. They share
// one partition key, so they belong to the shard the aggregate lands on.
func (p *producer) putAggregate(srv *kinesisfake.Server, next func() (string, []byte)) error {
	var users []kpl.UserRecord
	pk := ""
	for range 5 {
		k, data := next()
		if pk == "" {
			pk = k
		}
		users = append(users, kpl.UserRecord{PartitionKey: pk, Data: data})
	}
	agg, err := kpl.Pack(users)
	if err != nil {
		return err
	}
	_, _, err = srv.Put(p.stream, agg.PartitionKey, agg.Data)
	return err
}
