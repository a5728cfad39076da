// Command benthos-kinesis is Benthos with the aws_kinesis_streams input: the
// core pure and io components plus this module's input, and the efo command
// that manages stream consumers.
package main

import (
	"context"

	"github.com/redpanda-data/benthos/v4/public/service"

	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	_ "github.com/benthos-kinesis/benthos-kinesis/input"
)

// Set by -ldflags "-X main.version=... -X main.dateBuilt=...".
var (
	version   = "dev"
	dateBuilt = "unknown"
)

func main() {
	service.RunCLI(context.Background(),
		service.CLIOptSetBinaryName("benthos-kinesis"),
		service.CLIOptSetProductName("Benthos with Kinesis Enhanced Fan-Out"),
		service.CLIOptSetVersion(version, dateBuilt),
		service.CLIOptAddCommand(efoCommand()),
	)
}
