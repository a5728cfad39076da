package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// A scenario reads a whole stream of the fake once. Its read function calls
// meter.begin just before the part that is measured and meter.end right after
// it, and meter.count for every batch of records it reads; measure then
// checks that every record was read exactly once.
type scenario struct {
	name     string
	baseline string // the scenario its ratio is against; "" for a baseline
	stream   string
	read     func(ctx context.Context, f *fake, m *meter) error
}

// scenarios, in the order they run and are shown: each after its baseline.
var scenarios = []scenario{
	{name: "sdk-polling", stream: streamPlain, read: sdkPolling},
	{name: "input-polling", baseline: "sdk-polling", stream: streamPlain, read: inputPolling},
	{name: "input-polling-strict", baseline: "input-polling", stream: streamPlain, read: inputPollingStrict},
	{name: "sdk-efo", stream: streamPlain, read: sdkEFO},
	{name: "input-efo", baseline: "sdk-efo", stream: streamPlain, read: inputEFO},
	{name: "input-efo-strict", baseline: "input-efo", stream: streamPlain, read: inputEFOStrict},
	{name: "input-efo-kpl", baseline: "input-efo", stream: streamKPL, read: inputEFOKPL},
}

func scenarioNames() []string {
	var names []string
	for _, s := range scenarios {
		names = append(names, s.name)
	}
	return names
}

// selectScenarios returns the named scenarios and, transitively, their
// baselines, in table order.
func selectScenarios(list string) ([]scenario, error) {
	want := map[string]bool{}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(scenarioNames(), name) {
			return nil, fmt.Errorf("unknown scenario %q; known: %s", name, strings.Join(scenarioNames(), ", "))
		}
		want[name] = true
	}
	if len(want) == 0 {
		return nil, fmt.Errorf("no scenario named")
	}
	for i := len(scenarios) - 1; i >= 0; i-- { // baselines come before their dependants
		if s := scenarios[i]; want[s.name] && s.baseline != "" {
			want[s.baseline] = true
		}
	}
	var out []scenario
	for _, s := range scenarios {
		if want[s.name] {
			out = append(out, s)
		}
	}
	return out, nil
}
