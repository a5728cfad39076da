package input

import (
	// The binary always has the core components; tests build pipelines with them.
	_ "github.com/redpanda-data/benthos/v4/public/components/io"
	_ "github.com/redpanda-data/benthos/v4/public/components/pure"
)
