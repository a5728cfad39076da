package input

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redpanda-data/benthos/v4/public/service"

	"github.com/benthos-kinesis/benthos-kinesis/input/checkpoint"
	"github.com/benthos-kinesis/benthos-kinesis/input/inputtest"
	"github.com/benthos-kinesis/benthos-kinesis/internal/kinesisfake"
)

// Helpers shared by the package's tests: the input's YAML for the fake
// Kinesis, producers, and log and checkpoint helpers (inputtest holds the
// fake's starter and the one way to wait on a condition).

// fakeInput is the input's YAML for the fake, reading by fan-out unless
// extra says otherwise, committing every 100 ms.
func fakeInput(srv *kinesisfake.Server, streams, dir, extra string) string {
	return fakeYAML(srv, streams, fmt.Sprintf("{ dir: '%s', commit_period: 100ms }", dir), extra)
}

// fakeYAML is the input's YAML for the fake with the given checkpoint
// settings: what reaching the fake over TLS needs, and trim_horizon.
func fakeYAML(srv *kinesisfake.Server, streams, checkpoint, extra string) string {
	pem := strings.ReplaceAll(strings.TrimSpace(string(srv.CertificatePEM())), "\n", "\n      ")
	return fmt.Sprintf(`
streams: [ %s ]
endpoint: %s
region: %s
credentials: { id: fake, secret: fake }
tls:
  enabled: true
  root_cas: |
      %s
start_from: trim_horizon
checkpoint: %s
%s`, streams, srv.Endpoint(), srv.Region(), pem, checkpoint, extra)
}

// fakeProduce writes n records with data "<prefix>-<index>" through the
// fake's direct API, spread over keys partition keys.
func fakeProduce(t *testing.T, srv *kinesisfake.Server, stream, prefix string, n, keys int) inputtest.Produced {
	t.Helper()
	out := inputtest.Produced{}
	for i := 0; i < n; i++ {
		data := fmt.Sprintf("%s-%07d", prefix, i)
		pk := fmt.Sprintf("key-%d", i%keys)
		if _, _, err := srv.Put(stream, pk, []byte(data)); err != nil {
			t.Fatal(err)
		}
		out[data] = pk
	}
	return out
}

// fakeProducePerShard writes exactly perShard records to every open shard
// (by explicit hash key), with keys partition keys per shard.
func fakeProducePerShard(t *testing.T, srv *kinesisfake.Server, stream, prefix string, perShard, keys int) inputtest.Produced {
	t.Helper()
	shards, err := srv.Shards(stream)
	if err != nil {
		t.Fatal(err)
	}
	out := inputtest.Produced{}
	for i := 0; i < perShard; i++ {
		for s, sh := range shards {
			if sh.SequenceNumberRange.EndingSequenceNumber != nil {
				continue
			}
			data := fmt.Sprintf("%s-%d-%07d", prefix, s, i)
			pk := fmt.Sprintf("key-%d-%d", s, i%keys)
			if _, _, err := srv.PutWithHashKey(stream, *sh.HashKeyRange.StartingHashKey, pk, []byte(data)); err != nil {
				t.Fatal(err)
			}
			out[data] = pk
		}
	}
	return out
}

func containsShard(msgs []inputtest.Got, shardID string) bool {
	for _, m := range msgs {
		if m.Shard == shardID {
			return true
		}
	}
	return false
}

// newTestInput goes through the real config path: the spec parses the YAML,
// then the constructor validates it.
func newTestInput(t *testing.T, yaml string) (*kinesisInput, error) {
	t.Helper()
	pc, err := Spec().ParseYAML(yaml, nil)
	if err != nil {
		return nil, err
	}
	return newInput(pc, service.MockResources())
}

func pos(n int) checkpoint.Position { return checkpoint.Position{Sequence: strconv.Itoa(n)} }

// recreate deletes the fake's stream and creates it again with shards shards.
func recreate(t *testing.T, srv *kinesisfake.Server, stream string, shards int) {
	t.Helper()
	if err := srv.DeleteStream(stream); err != nil {
		t.Fatal(err)
	}
	inputtest.WaitUntil(t, 10*time.Second, func() bool { return srv.CreateStream(stream, shards) == nil })
}

// produceFor writes records to the fake for d, at about rate records/s.
func produceFor(t *testing.T, srv *kinesisfake.Server, stream, prefix string, d time.Duration, rate int) inputtest.Produced {
	t.Helper()
	out := inputtest.Produced{}
	tick := time.NewTicker(time.Second / time.Duration(rate/10))
	defer tick.Stop()
	end := time.Now().Add(d)
	i := 0
	for time.Now().Before(end) {
		<-tick.C
		for range 10 {
			data := fmt.Sprintf("%s-%07d", prefix, i)
			pk := fmt.Sprintf("key-%07d", i%29)
			if _, _, err := srv.Put(stream, pk, []byte(data)); err != nil {
				t.Fatal(err)
			}
			out[data] = pk
			i++
		}
	}
	return out
}

func containsData(msgs []inputtest.Got, data string) bool {
	for _, m := range msgs {
		if m.Data == data {
			return true
		}
	}
	return false
}

// allDelivered reports whether every record of want is among msgs.
func allDelivered(msgs []inputtest.Got, want inputtest.Produced) bool {
	seen := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		seen[m.Data] = true
	}
	for d := range want {
		if !seen[d] {
			return false
		}
	}
	return true
}

// steady is a condition for waitUntil: value has not changed for quiet.
func steady(value func() int, quiet time.Duration) func() bool {
	last, since := value(), time.Now()
	return func() bool {
		if v := value(); v != last {
			last, since = v, time.Now()
		}
		return time.Since(since) >= quiet
	}
}

// logLines returns the lines of logs that contain any of words.
// hasLine reports whether one line of logs holds every part.
func hasLine(logs string, parts ...string) bool {
	for _, l := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			if !strings.Contains(l, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func logLines(logs *inputtest.Logs, words ...string) []string {
	var out []string
	for _, l := range strings.Split(logs.String(), "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// editFileCheckpoints loads the stream's checkpoints from the directory,
// lets edit change them, and saves them, as `checkpoint set` does.
func editFileCheckpoints(t testing.TB, dir, arn string, edit func(*checkpoint.Stream)) {
	t.Helper()
	store, err := checkpoint.OpenFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	st, err := store.Load(context.Background(), arn)
	if err != nil {
		t.Fatal(err)
	}
	edit(&st)
	if err := store.Save(context.Background(), st); err != nil {
		t.Fatal(err)
	}
}

// setFilePosition sets a shard's stored position in the directory.
func setFilePosition(t testing.TB, dir, arn, shardID, seq string) {
	t.Helper()
	editFileCheckpoints(t, dir, arn, func(st *checkpoint.Stream) {
		cp := st.Shards[shardID]
		cp.Position = &checkpoint.Position{Sequence: seq}
		st.Shards[shardID] = cp
	})
}
