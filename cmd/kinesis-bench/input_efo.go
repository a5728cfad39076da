package main

import "context"

// inputEFO reads the plain stream through the input, reader efo, by the
// consumer the fake registered (lazy registration finds it ACTIVE).
func inputEFO(ctx context.Context, f *fake, m *meter) error {
	return readWithInput(ctx, f, m, streamPlain, settings{
		{"reader", "efo"}, {"efo.consumer_name", consumer},
	})
}
