package kinesisfake

// Behavior: a stream's record size and placement (2025-2026).
//
// Since October 2025 a stream has a MaxRecordSizeInKiB of 1,024 (the
// default) to 10,240, set at CreateStream or by UpdateMaxRecordSize and
// reported by DescribeStreamSummary; a record's data may be that large, and
// PutRecords takes up to 10 MiB a call. The shard limits did not change (1
// MiB/s written, 2 MiB/s read), so a single record can fill a GetRecords
// answer or a fan-out event, and a shard's write budget goes into debt for
// the seconds such a record is worth. Since September 2026 an ON_DEMAND
// stream may place records itself (RecordDistributionStrategy AUTO, set at
// CreateStream or by UpdateStreamRecordDistributionStrategy): the partition
// key and explicit hash key of a record are ignored and records are spread
// over the open shards, so no order per key exists; records already written
// keep their shards when the strategy changes, which it may at any time. A
// PROVISIONED stream refuses AUTO with InvalidArgumentException. The fake
// does the same; it spreads AUTO records over the open shards in turn.

const (
	minRecordKiB = 1024
	maxRecordKiB = 10240

	distributionUser = "USER_PARTITION_KEY"
	distributionAuto = "AUTO"
)

// streamProps are a stream's settings beyond its shards.
type streamProps struct {
	onDemand     bool
	maxRecordKiB int    // 1,024 to 10,240
	distribution string // distributionUser or distributionAuto
}

func defaultProps() streamProps {
	return streamProps{maxRecordKiB: minRecordKiB, distribution: distributionUser}
}

// StreamOpt sets a property of a stream made by the Stream option or the
// CreateStream helper.
type StreamOpt func(*streamProps)

// MaxRecordKiB sets the stream's MaxRecordSizeInKiB: the largest record's
// data, in KiB (1,024 to 10,240; default 1,024, as AWS).
func MaxRecordKiB(kib int) StreamOpt { return func(p *streamProps) { p.maxRecordKiB = kib } }

// OnDemand makes the stream ON_DEMAND (default PROVISIONED).
func OnDemand() StreamOpt { return func(p *streamProps) { p.onDemand = true } }

// AutoDistribution makes the stream place its records itself (AUTO),
// ignoring partition keys and explicit hash keys; the stream is ON_DEMAND,
// as AUTO requires.
func AutoDistribution() StreamOpt {
	return func(p *streamProps) { p.onDemand, p.distribution = true, distributionAuto }
}

func (p streamProps) mode() string {
	if p.onDemand {
		return "ON_DEMAND"
	}
	return "PROVISIONED"
}

// check answers the API's error for settings AWS refuses.
func (p streamProps) check(name string) *apiError {
	if err := validRecordKiB(p.maxRecordKiB); err != nil {
		return err
	}
	return validDistribution(name, p.distribution, p.onDemand)
}

func validRecordKiB(kib int) *apiError {
	if kib < minRecordKiB || kib > maxRecordKiB {
		return errf(CodeValidation, "1 validation error detected: Value '%d' at 'maxRecordSizeInKiB' failed to satisfy constraint: Member must have value between %d and %d", kib, minRecordKiB, maxRecordKiB)
	}
	return nil
}

func validDistribution(name, strategy string, onDemand bool) *apiError {
	switch strategy {
	case distributionUser:
		return nil
	case distributionAuto:
		if !onDemand {
			return errf(CodeInvalidArgument, "Stream %s is in PROVISIONED mode. The record distribution strategy AUTO is supported only for streams in ON_DEMAND mode.", name)
		}
		return nil
	}
	return errf(CodeValidation, "1 validation error detected: Value '%s' at 'recordDistributionStrategy' failed to satisfy constraint: Member must satisfy enum value set: [%s, %s]", strategy, distributionAuto, distributionUser)
}

// maxRecordBytes is the largest record data the stream takes.
func (sm *stream) maxRecordBytes() int { return sm.props.maxRecordKiB << 10 }

// checkRecordSize answers the error for data larger than the stream takes.
func (sm *stream) checkRecordSize(prefix string, data []byte) *apiError {
	if len(data) > sm.maxRecordBytes() {
		return errf(CodeValidation, "1 validation error detected: Value at '%sdata' failed to satisfy constraint: Member must have length less than or equal to %d (the MaxRecordSizeInKiB of stream %s is %d)", prefix, sm.maxRecordBytes(), sm.name, sm.props.maxRecordKiB)
	}
	return nil
}

// autoShard is the open shard an AUTO stream places its next record on:
// each in turn.
func (sm *stream) autoShard() *shard {
	open := sm.openShards()
	if len(open) == 0 {
		return nil
	}
	sh := open[sm.autoNext%len(open)]
	sm.autoNext++
	return sh
}
