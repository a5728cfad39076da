// Command example-own-binary shows how to put the aws_kinesis_streams input
// into a Benthos binary of your own, next to the components you choose. It
// is a module of its own, as yours would be; only its replace directive,
// which builds it against this checkout, would go.
//
//	go build -o my-benthos . && ./my-benthos list inputs
package main

import (
	"context"

	"github.com/redpanda-data/benthos/v4/public/service"

	// Benthos' core components: pure processors, stdin/stdout/file, ...
	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"

	// The input registers itself as aws_kinesis_streams.
	"github.com/benthos-kinesis/benthos-kinesis/input"
)

func main() {
	service.RunCLI(context.Background(),
		// Instances of one lease group compare their pipeline configs and
		// report one that differs (checkpoint.dynamodb.group); lint refuses
		// values of the input's config of the wrong type.
		input.CLIOpt(),
	)
}
