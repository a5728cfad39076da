package main

import "context"

// inputEFOKPL reads the same user records as inputEFO, packed in KPL
// aggregates, through the input by fan-out with deaggregate on: its ratio to
// input-efo is what aggregation saves or costs per user record.
func inputEFOKPL(ctx context.Context, f *fake, m *meter) error {
	return readWithInput(ctx, f, m, streamKPL, settings{
		{"reader", "efo"}, {"efo.consumer_name", consumer}, {"deaggregate", true},
	})
}
