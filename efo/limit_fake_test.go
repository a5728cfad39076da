package efo

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// TestRegistrationRefusedForTheConsumerLimit: a stream with every consumer
// it takes refuses another (LimitExceededException, as it refuses a call
// over its rate); the lazy registration then fails at once, naming the
// limit of the account (20, or 50 with On-demand Advantage, as the account
// settings tell) and the consumers registered, instead of retrying until
// its time-out as for a throttle.
func TestRegistrationRefusedForTheConsumerLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		opts  []kinesisfake.Opt
		limit int
		want  string
	}{
		{"standard", nil, 20, "20 a stream; an account with On-demand Advantage may register 50"},
		{"advantage", []kinesisfake.Opt{kinesisfake.OnDemandAdvantage()}, 50, "50 a stream, the limit of an account with On-demand Advantage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, err := kinesisfake.New(append([]kinesisfake.Opt{kinesisfake.Stream("orders", 1), kinesisfake.ConsumerActivationDelay(0)}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			for i := range tc.limit {
				if _, err := srv.RegisterConsumer("orders", fmt.Sprintf("app-%02d", i)); err != nil {
					t.Fatal(err)
				}
			}
			start := time.Now()
			_, err = Register(t.Context(), srv.NewClient(), srv.StreamARN("orders"), "one-more", WaitOptions{BackoffInitial: 10 * time.Millisecond, Timeout: time.Minute})
			if err == nil {
				t.Fatal("a registration on a stream with every consumer it takes succeeded")
			}
			for _, want := range []string{"LimitExceededException", fmt.Sprintf("has %d consumers registered", tc.limit), tc.want, "app-00 (ACTIVE)", fmt.Sprintf("app-%02d (ACTIVE)", tc.limit-1), "efo deregister", "one-more is not registered"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error lacks %q:\n%v", want, err)
				}
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("the refusal took %v: retried as a throttle", d)
			}
		})
	}
}
