package kinesisfake

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"

	"github.com/benthos-kinesis/benthos-kinesis/internal/sdkopt"
)

// subscribe calls SubscribeToShard and closes the stream at the end of the
// test.
//
// Each call gets a protocol instance of its own: aws-sdk-go-v2 keeps event
// stream decoding state in the client's protocol (smithy-go
// internal/eventstream.Codec), and two streams read at once through one
// client race on it (go test -race reports it).
func subscribe(t testing.TB, c *kinesis.Client, consumerARN, shard string, pos types.StartingPosition) (*kinesis.SubscribeToShardEventStream, error) {
	t.Helper()
	out, err := c.SubscribeToShard(testCtx(t), &kinesis.SubscribeToShardInput{ConsumerARN: aws.String(consumerARN), ShardId: aws.String(shard), StartingPosition: &pos}, sdkopt.OwnProtocol)
	if err != nil {
		return nil, err
	}
	es := out.GetStream()
	t.Cleanup(func() { es.Close() })
	return es, nil
}

func trimHorizon() types.StartingPosition {
	return types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon}
}

func afterSeq(seq string) types.StartingPosition {
	return types.StartingPosition{Type: types.ShardIteratorTypeAfterSequenceNumber, SequenceNumber: aws.String(seq)}
}

// nextEvent waits for the next event; ok is false if the stream ended.
func nextEvent(t testing.TB, es *kinesis.SubscribeToShardEventStream, timeout time.Duration) (ev types.SubscribeToShardEvent, ok bool) {
	t.Helper()
	select {
	case e, open := <-es.Events():
		if !open {
			return ev, false
		}
		m, isEvent := e.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
		if !isEvent {
			t.Fatalf("unexpected event %T", e)
		}
		return m.Value, true
	case <-time.After(timeout):
		t.Fatalf("no event within %v", timeout)
	}
	return ev, false
}

// waitEnd waits for the stream to end and returns its error.
func waitEnd(t testing.TB, es *kinesis.SubscribeToShardEventStream, timeout time.Duration) error {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case _, open := <-es.Events():
			if !open {
				return es.Err()
			}
		case <-deadline:
			t.Fatalf("stream did not end within %v", timeout)
		}
	}
}

func eventData(ev types.SubscribeToShardEvent) []string {
	var out []string
	for _, r := range ev.Records {
		out = append(out, string(r.Data))
	}
	return out
}

// protoClient records the protocol of every response.
type protoClient struct {
	hc     *http.Client
	mu     sync.Mutex
	protos map[string]int
}

func (p *protoClient) Do(r *http.Request) (*http.Response, error) {
	resp, err := p.hc.Do(r)
	if err == nil {
		p.mu.Lock()
		if p.protos == nil {
			p.protos = map[string]int{}
		}
		p.protos[resp.Proto]++
		p.mu.Unlock()
	}
	return resp, err
}

func (p *protoClient) seen() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.protos {
		out[k] = v
	}
	return out
}

// h2cClient speaks unencrypted HTTP/2 with prior knowledge.
func h2cClient(t testing.TB) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: bodyShield{tr}}
}

// waitActive waits until the consumer is ACTIVE.
func waitActive(t testing.TB, c *kinesis.Client, arn string) {
	t.Helper()
	ctx := testCtx(t)
	for range 200 {
		out, err := c.DescribeStreamConsumer(ctx, &kinesis.DescribeStreamConsumerInput{ConsumerARN: aws.String(arn)})
		if err == nil && out.ConsumerDescription.ConsumerStatus == types.ConsumerStatusActive {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("consumer %s never became ACTIVE", arn)
}

func waitFor(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
