package input

import "time"

// budgetStall is how long shards wait for room with none coming back before
// one read goes over memory_limit (membudget.Budget.OnStall).
var budgetStall = 10 * time.Second

// budgetStalled warns, at most once a minute, that a read went over
// memory_limit because no room came back.
func (in *kinesisInput) budgetStalled(granted int64) {
	in.stallMu.Lock()
	defer in.stallMu.Unlock()
	if time.Since(in.stallWarned) < time.Minute {
		return
	}
	in.stallWarned = time.Now()
	in.log.Warnf("memory_limit: shards waited %v for room, none came back, and the pipeline waits for records: a read of %d bytes goes over the limit, and another every %v while this lasts. The pipeline holds more records unacknowledged than memory_limit allows them (%d bytes): an output or a processor batching by count or byte_size waits for records that cannot be read until it lets go of some. Raise memory_limit, or lower that batch", budgetStall, granted, budgetStall, in.budget.Limit())
}
