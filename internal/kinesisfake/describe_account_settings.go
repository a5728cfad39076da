package kinesisfake

import "time"

// Behavior: DescribeAccountSettings.
//
// AWS reports the account's minimum throughput billing commitment, which
// On-demand Advantage is (since late 2025): ENABLED (or
// ENABLED_UNTIL_EARLIEST_ALLOWED_END) with it, DISABLED without. The fake
// answers ENABLED with OnDemandAdvantage, DISABLED otherwise, with no dates.

type accountSettingsJSON struct {
	MinimumThroughputBillingCommitment struct{ Status string }
}

func (s *Server) describeAccountSettings(c *call) (any, error) {
	var out accountSettingsJSON
	out.MinimumThroughputBillingCommitment.Status = "DISABLED"
	err := s.doErr(func(st *state, _ time.Time) *apiError {
		if st.s.cfg.advantage {
			out.MinimumThroughputBillingCommitment.Status = "ENABLED"
		}
		return nil
	})
	return out, err
}
