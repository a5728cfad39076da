package read

import "errors"

// errNotHandedOut resolves a tracked batch that never reached the pipeline
// (its reader stopped while it waited): like a rejection, the checkpoint
// stays before it, and nobody waits for its acknowledgement.
var errNotHandedOut = errors.New("the batch was never handed to the pipeline")

// errLapsed stops a reader whose grant lapsed: not renewed for a lease
// period (the process was paused, or the table is unreachable), so another
// instance may read the shard now.
var errLapsed = errors.New("the shard's lease was not renewed within lease_period")
