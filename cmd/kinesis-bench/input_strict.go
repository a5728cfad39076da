package main

import "context"

// inputEFOStrict is input-efo with strict_order: a shard hands over its next
// batch only once the previous one is acknowledged. Its ratio to input-efo
// is what strict order costs.
func inputEFOStrict(ctx context.Context, f *fake, m *meter) error {
	return readWithInput(ctx, f, m, streamPlain, settings{
		{"reader", "efo"}, {"efo.consumer_name", consumer}, {"strict_order", true},
	})
}

// inputPollingStrict is input-polling with strict_order.
func inputPollingStrict(ctx context.Context, f *fake, m *meter) error {
	return readWithInput(ctx, f, m, streamPlain, settings{
		{"reader", "polling"}, {"polling.interval", "200ms"}, {"polling.limit", getRecordsLimit}, {"strict_order", true},
	})
}
