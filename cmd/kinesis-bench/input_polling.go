package main

import "context"

// inputPolling reads the plain stream through the input, reader polling, at
// its shortest interval (200 ms, the Kinesis quota) and largest limit.
func inputPolling(ctx context.Context, f *fake, m *meter) error {
	return readWithInput(ctx, f, m, streamPlain, settings{
		{"reader", "polling"}, {"polling.interval", "200ms"}, {"polling.limit", getRecordsLimit},
	})
}
