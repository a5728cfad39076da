// Command benthos-kinesis is Benthos with the aws_kinesis_streams input: the
// core pure and io components plus this module's input, a prometheus metrics
// exporter (the default), and the efo command that manages stream consumers.
package main

import (
	"context"

	"github.com/redpanda-data/benthos/v4/public/service"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	"github.com/benthos-kinesis/benthos-kinesis/input"
	// The prometheus metrics exporter, Benthos' default once registered:
	// /metrics serves every metric without any metrics config.
	_ "github.com/benthos-kinesis/benthos-kinesis/internal/promexport"
)

// Set by -ldflags "-X main.version=... -X main.dateBuilt=...".
var (
	version   = "dev"
	dateBuilt = "unknown"
)

func main() {
	// This binary runs nothing but pipelines: their inputs' memory_limit
	// sets the Go runtime's soft memory limit (unless GOMEMLIMIT does).
	input.ManageGoMemoryLimit()
	service.RunCLI(context.Background(),
		service.CLIOptSetBinaryName("benthos-kinesis"),
		// Benthos writes it into sentences ("List all benthos-kinesis
		// component types", "Launching a benthos-kinesis instance").
		service.CLIOptSetProductName("benthos-kinesis"),
		service.CLIOptSetDocumentationURL("https://github.com/benthos-kinesis/benthos-kinesis"),
		service.CLIOptSetVersion(version, dateBuilt),
		service.CLIOptAddCommand(efoCommand()),
		service.CLIOptAddCommand(checkpointCommand()),
		// Instances of one lease group compare their pipeline configs, and
		// lint refuses values of the input's config of the wrong type.
		input.CLIOpt(),
	)
}
