package read

import (
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"
)

// Delivery is one Benthos batch on its way from a shard reader to the
// component's ReadBatch, which hands it to the pipeline and tells it the
// pipeline's answer.
type Delivery interface {
	// Batch is the batch's messages.
	Batch() service.MessageBatch
	// Ack resolves the batch (nil error: acknowledged).
	Ack(err error)
	// Lapsed reports whether the reader's grant lapsed before the batch was
	// taken: a reader's select may pick the send over the lapse when both
	// were ready (after a pause of the process). Such a batch is not handed
	// out: it is withdrawn.
	Lapsed(now time.Time) bool
	// Withdraw resolves a batch that is not handed out after all, and stops
	// its reader: the checkpoint stays before the batch, nobody waits for
	// it, and the next reader of the shard reads it again. (A reader that
	// read on would hand out records the checkpoint can no longer pass, and
	// they would come again after the next move of the lease.)
	Withdraw()
}

// delivery is a shard reader's Delivery: a batch it tracks as e.
type delivery struct {
	batch service.MessageBatch
	r     *shardReader
	e     *tracked
}

func (d *delivery) Batch() service.MessageBatch { return d.batch }

func (d *delivery) Ack(err error) { d.r.ack(d.e, err) }

func (d *delivery) Lapsed(now time.Time) bool { return !now.Before(d.r.g.Until()) }

func (d *delivery) Withdraw() {
	d.r.tracker.Ack(d.e, errNotHandedOut)
	d.r.g.stop(errLapsed)
	d.r.log.Warnf("a batch of %d records was withheld: the shard's lease lapsed (not renewed within lease_period) before the pipeline took it; the shard is read again from its checkpoint once the lease is renewed", len(d.batch))
}
