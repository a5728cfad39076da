package kinesisfake

import "time"

// Behavior: UpdateMaxRecordSize.
//
// AWS sets a stream's MaxRecordSizeInKiB (1,024 to 10,240: ValidationException
// otherwise); the stream must be ACTIVE and is UPDATING for a while. Records
// already written keep their size. The fake does the same, UPDATING for
// StreamStatusDelay. The answer is empty.

type updateMaxRecordSizeInput struct {
	StreamARN          string
	MaxRecordSizeInKiB *int
}

func (s *Server) updateMaxRecordSize(c *call) (any, error) {
	var in updateMaxRecordSizeInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	if in.MaxRecordSizeInKiB == nil {
		return nil, errf(CodeValidation, "1 validation error detected: Value null at 'maxRecordSizeInKiB' failed to satisfy constraint: Member must not be null")
	}
	if err := validRecordKiB(*in.MaxRecordSizeInKiB); err != nil {
		return nil, err
	}
	return struct{}{}, s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.activeStream(streamRef{ARN: in.StreamARN}, now, false)
		if err != nil {
			return err
		}
		sm.props.maxRecordKiB = *in.MaxRecordSizeInKiB
		sm.updatingUntil = now.Add(st.s.cfg.streamDelay)
		return nil
	})
}

// UpdateMaxRecordSize sets a stream's MaxRecordSizeInKiB at once, as the
// operation would.
func (s *Server) UpdateMaxRecordSize(stream string, kib int) error {
	return s.doErr(func(st *state, now time.Time) *apiError {
		if err := validRecordKiB(kib); err != nil {
			return err
		}
		sm, err := st.lookupStream(streamRef{Name: stream})
		if err != nil {
			return err
		}
		sm.props.maxRecordKiB = kib
		return nil
	})
}
