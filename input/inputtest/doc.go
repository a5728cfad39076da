// Package inputtest holds what the integration tests of the input and of the
// binary share: a whole test pipeline, a recording output, producers (plain
// and KPL-aggregated records) and the checks of delivery, order and
// checkpoints. Only tests import it.
package inputtest
