package main

import (
	"context"
	"errors"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// eachShard runs read on every shard of stream, one goroutine per shard, as
// a bare SDK consumer would, and measures from the first call to the last
// record. Every run gets a new client with the SDK's defaults: like the
// input, which builds its client at Connect, it pays for its connection, and
// its transport's goroutines carry this run's profile label.
func eachShard(ctx context.Context, f *fake, m *meter, stream string, read func(ctx context.Context, client *kinesis.Client, shardID string, want int) error) error {
	shards := f.shards[stream]
	errs := make([]error, len(shards))
	var wg sync.WaitGroup
	m.begin()
	client := f.srv.NewClient()
	for i, id := range shards {
		wg.Go(func() { errs[i] = read(ctx, client, id, f.perShard(i)) })
	}
	wg.Wait()
	m.end()
	if c, ok := client.Options().HTTPClient.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	return errors.Join(errs...)
}

// countRecords counts a response's records and their bytes.
func countRecords(m *meter, recs []types.Record) {
	n := 0
	for i := range recs {
		n += len(recs[i].Data)
	}
	m.count(len(recs), n)
}
