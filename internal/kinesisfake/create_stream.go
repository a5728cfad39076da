package kinesisfake

import (
	"time"
)

// Behavior: CreateStream.
//
// AWS creates a stream with ShardCount shards (PROVISIONED) or 4 shards
// (ON_DEMAND) splitting the 128-bit hash key space evenly; the stream is
// CREATING for a while, then ACTIVE. An existing name (in any status) is a
// ResourceInUseException. The fake does the same; the CREATING time is
// StreamStatusDelay (default 0, so the stream is ACTIVE at once). A stream has
// at most 10,000 shards here (LimitExceededException beyond); AWS's limit is
// an account quota. MaxRecordSizeInKiB and RecordDistributionStrategy are
// kept (see stream_props.go); tags, encryption and warm throughput are
// accepted and ignored.

type createStreamInput struct {
	StreamName                 string
	ShardCount                 *int
	StreamModeDetails          *struct{ StreamMode string }
	MaxRecordSizeInKiB         *int
	RecordDistributionStrategy string
}

const (
	maxShardsPerStream = 10000
	onDemandShards     = 4
)

func (s *Server) createStream(c *call) (any, error) {
	var in createStreamInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if err := validName("streamName", in.StreamName); err != nil {
		return nil, err
	}
	mode := "PROVISIONED"
	if in.StreamModeDetails != nil && in.StreamModeDetails.StreamMode != "" {
		mode = in.StreamModeDetails.StreamMode
	}
	var n int
	switch mode {
	case "PROVISIONED":
		if in.ShardCount == nil {
			return nil, errf(CodeInvalidArgument, "ShardCount is required for a stream in PROVISIONED mode.")
		}
		n = *in.ShardCount
	case "ON_DEMAND":
		n = onDemandShards
		if in.ShardCount != nil {
			n = *in.ShardCount
		}
	default:
		return nil, errf(CodeValidation, "1 validation error detected: Value '%s' at 'streamModeDetails.streamMode' failed to satisfy constraint: Member must satisfy enum value set: [PROVISIONED, ON_DEMAND]", mode)
	}
	props := defaultProps()
	props.onDemand = mode == "ON_DEMAND"
	if in.MaxRecordSizeInKiB != nil {
		props.maxRecordKiB = *in.MaxRecordSizeInKiB
	}
	if in.RecordDistributionStrategy != "" {
		props.distribution = in.RecordDistributionStrategy
	}
	return nil, s.doErr(func(st *state, now time.Time) *apiError {
		_, err := st.createStream(in.StreamName, n, props, now, false)
		return err
	})
}

// createStream adds a stream with n shards; immediate makes it ACTIVE at once.
func (st *state) createStream(name string, n int, props streamProps, now time.Time, immediate bool) (*stream, *apiError) {
	if err := props.check(name); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, errf(CodeValidation, "1 validation error detected: Value '%d' at 'shardCount' failed to satisfy constraint: Member must have value greater than or equal to 1", n)
	}
	if n > maxShardsPerStream {
		return nil, errf(CodeLimitExceeded, "This request would exceed the shard limit for the account %s in %s. Current limit of shards is %d.", st.s.cfg.acct, st.s.cfg.region, maxShardsPerStream)
	}
	if _, ok := st.streams[name]; ok {
		return nil, errf(CodeResourceInUse, "Stream %s under account %s already exists.", name, st.s.cfg.acct)
	}
	sm := &stream{
		name:     name,
		arn:      st.s.StreamARN(name),
		serial:   st.nextSerial,
		created:  now,
		activeAt: now,
		props:    props,
	}
	if !immediate {
		sm.activeAt = now.Add(st.s.cfg.streamDelay)
	}
	st.nextSerial++
	starts := evenStarts(n)
	for i, start := range starts {
		end := maxHashKey
		if i+1 < n {
			end = sub1(starts[i+1])
		}
		st.addShard(sm, start, end, "", "", now).initial = true
	}
	st.streams[name] = sm
	st.bySerial[sm.serial] = sm
	return sm, nil
}

func (st *state) presetStream(p presetStream, now time.Time) error {
	if err := validName("streamName", p.name); err != nil {
		return err
	}
	if _, err := st.createStream(p.name, p.shards, p.props(), now, true); err != nil {
		return err
	}
	return nil
}

// validName checks a stream or consumer name against the API's pattern.
func validName(field, v string) *apiError {
	if v == "" || len(v) > 128 {
		return errf(CodeValidation, "1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must have length between 1 and 128", v, field)
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return errf(CodeValidation, "1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+", v, field)
		}
	}
	return nil
}
