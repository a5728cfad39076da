package kinesisfake

import (
	"time"
)

// Behavior: DeleteStream.
//
// AWS puts the stream in DELETING and removes it, its shards, data and
// consumers a little later; a stream with registered consumers is only deleted
// with EnforceConsumerDeletion, else ResourceInUseException. The fake does the
// same; the DELETING time is StreamStatusDelay (default 0: the stream is gone at
// once). While DELETING, data-plane calls get ResourceNotFoundException (AWS
// may still serve them for a while). Live subscriptions of the stream's
// consumers receive a ResourceNotFoundException exception frame and end.

type deleteStreamInput struct {
	StreamName              string
	StreamARN               string
	EnforceConsumerDeletion bool
}

func (s *Server) deleteStream(c *call) (any, error) {
	var in deleteStreamInput
	if err := c.decode(&in); err != nil {
		return nil, err
	}
	return nil, s.doErr(func(st *state, now time.Time) *apiError {
		sm, err := st.lookupStream(streamRef{in.StreamName, in.StreamARN})
		if err != nil {
			return err
		}
		return st.deleteStream(sm, in.EnforceConsumerDeletion, now)
	})
}

func (st *state) deleteStream(sm *stream, enforce bool, now time.Time) *apiError {
	if sm.deleting {
		return errf(CodeResourceInUse, "Stream %s under account %s is already being deleted.", sm.name, st.s.cfg.acct)
	}
	if len(sm.consumers) > 0 && !enforce {
		return errf(CodeResourceInUse, "Stream %s under account %s has registered consumers; set EnforceConsumerDeletion to delete it.", sm.name, st.s.cfg.acct)
	}
	for _, c := range sm.consumers {
		st.endConsumerSubs(c, CodeResourceNotFound, "Stream "+sm.name+" under account "+st.s.cfg.acct+" is being deleted.")
	}
	sm.deleting = true
	sm.deleteAt = now.Add(st.s.cfg.streamDelay)
	for _, sh := range sm.shards {
		sh.wake()
	}
	if st.s.cfg.streamDelay <= 0 {
		delete(st.streams, sm.name)
		delete(st.bySerial, sm.serial)
		return nil
	}
	st.scheduleSweep(sm.deleteAt)
	return nil
}
