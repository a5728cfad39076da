package emulator

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/types"
)

// These tests run the proxy against a fake upstream that answers
// SubscribeToShard the way kinesis-local does (no initial-response, errors as
// exception frames in an HTTP 200), so they need no Node.js.

// fakeFrame is one frame the fake upstream sends.
type fakeFrame struct {
	exception string // exception type; empty for a SubscribeToShardEvent
	payload   string
}

func eventFrame(seq string, data ...string) fakeFrame {
	recs := make([]string, len(data))
	for i, d := range data {
		recs[i] = fmt.Sprintf(`{"Data":%q,"PartitionKey":"pk","SequenceNumber":"%s%02d","ApproximateArrivalTimestamp":1.7e9}`,
			base64.StdEncoding.EncodeToString([]byte(d)), seq, i)
	}
	return fakeFrame{payload: fmt.Sprintf(`{"Records":[%s],"ContinuationSequenceNumber":%q,"MillisBehindLatest":0}`,
		strings.Join(recs, ","), seq)}
}

func exceptionFrame(typ, message string) fakeFrame {
	return fakeFrame{exception: typ, payload: fmt.Sprintf(`{"message":%q}`, message)}
}

func (f fakeFrame) encode(t testing.TB) []byte {
	var msg eventstream.Message
	if f.exception != "" {
		msg.Headers.Set(":message-type", eventstream.StringValue("exception"))
		msg.Headers.Set(":exception-type", eventstream.StringValue(f.exception))
	} else {
		msg.Headers.Set(":message-type", eventstream.StringValue("event"))
		msg.Headers.Set(":event-type", eventstream.StringValue("SubscribeToShardEvent"))
	}
	msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
	msg.Payload = []byte(f.payload)
	var buf bytes.Buffer
	if err := eventstream.NewEncoder().Encode(&buf, msg); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// fakeUpstream serves SubscribeToShard with frames, then waits for hold (if
// not nil) or the request's end, and reports the request's end on ended.
// Other requests get a fixed ListStreams answer.
type fakeUpstream struct {
	frames []fakeFrame
	hold   chan struct{}
	cut    bool // break the connection inside a frame after the frames
	ended  chan struct{}
	target chan string // X-Amz-Target of non-subscribe requests
}

func (f *fakeUpstream) start(t *testing.T) string {
	f.ended = make(chan struct{}, 16)
	f.target = make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != subscribeToShardTarget {
			f.target <- r.Header.Get("X-Amz-Target")
			w.Header().Set("Content-Type", "application/x-amz-json-1.1")
			_, _ = io.WriteString(w, `{"StreamNames":["s"],"HasMoreStreams":false}`)
			return
		}
		defer func() { f.ended <- struct{}{} }()
		w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
		w.WriteHeader(http.StatusOK)
		for _, fr := range f.frames {
			_, _ = w.Write(fr.encode(t))
			_ = http.NewResponseController(w).Flush()
		}
		if f.cut {
			_, _ = w.Write(eventFrame("x", "lost").encode(t)[:20])
			_ = http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler)
		}
		if f.hold != nil {
			select {
			case <-f.hold:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func testClient(endpoint string) *kinesis.Client {
	return kinesis.New(kinesis.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  Credentials(),
		HTTPClient:   newHTTPClient(),
	})
}

func subscribeInput() *kinesis.SubscribeToShardInput {
	return &kinesis.SubscribeToShardInput{
		ConsumerARN:      aws.String("arn:aws:kinesis:us-east-1:000000000000:stream/s/consumer/c:1"),
		ShardId:          aws.String("shardId-000000000000"),
		StartingPosition: &types.StartingPosition{Type: types.ShardIteratorTypeTrimHorizon},
	}
}

func TestEFOProxyInsertsInitialResponse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	up := &fakeUpstream{frames: []fakeFrame{eventFrame("1", "a", "b"), eventFrame("2"), eventFrame("3", "c")}}
	upstream := up.start(t)

	// Without the proxy the SDK rejects kinesis-local's stream outright.
	_, err := testClient(upstream).SubscribeToShard(ctx, subscribeInput(), ownEventStreamCodec)
	if err == nil || !strings.Contains(err.Error(), "initial-response") {
		t.Fatalf("direct SubscribeToShard: got %v, want the SDK's initial-response error", err)
	}

	out, err := testClient(EFOProxy(t, upstream)).SubscribeToShard(ctx, subscribeInput(), ownEventStreamCodec)
	if err != nil {
		t.Fatalf("SubscribeToShard through the proxy: %v", err)
	}
	stream := out.GetStream()
	defer stream.Close()
	var got []string
	var seqs []string
	for ev := range stream.Events() {
		e, ok := ev.(*types.SubscribeToShardEventStreamMemberSubscribeToShardEvent)
		if !ok {
			t.Fatalf("unexpected event %T", ev)
		}
		seqs = append(seqs, aws.ToString(e.Value.ContinuationSequenceNumber))
		for _, r := range e.Value.Records {
			got = append(got, string(r.Data))
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream error: %v", err)
	}
	if strings.Join(got, ",") != "a,b,c" || strings.Join(seqs, ",") != "1,2,3" {
		t.Fatalf("got records %q continuations %q, want a,b,c and 1,2,3", got, seqs)
	}
}

// TestEFOProxyServesHTTP2 checks a client that speaks only HTTP/2 without
// TLS, as a client built for AWS's HTTP/2 SubscribeToShard may.
func TestEFOProxyServesHTTP2(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	up := &fakeUpstream{frames: []fakeFrame{eventFrame("1", "a"), eventFrame("2", "b")}}
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	t.Cleanup(tr.CloseIdleConnections)
	var proto string
	client := kinesis.New(kinesis.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(EFOProxy(t, up.start(t))),
		Credentials:  Credentials(),
		HTTPClient: httpClientFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := tr.RoundTrip(r)
			if err == nil {
				proto = resp.Proto
			}
			return resp, err
		}),
	})
	out, err := client.SubscribeToShard(ctx, subscribeInput(), ownEventStreamCodec)
	if err != nil {
		t.Fatal(err)
	}
	stream := out.GetStream()
	defer stream.Close()
	n := 0
	for range stream.Events() {
		n++
	}
	if n != 2 || stream.Err() != nil || proto != "HTTP/2.0" {
		t.Fatalf("got %d events, error %v over %s; want 2 events over HTTP/2.0", n, stream.Err(), proto)
	}
}

type httpClientFunc func(*http.Request) (*http.Response, error)

func (f httpClientFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func TestEFOProxyTurnsLeadingExceptionIntoAPIError(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		exception string
		target    any
	}{
		{"ResourceInUseException", new(*types.ResourceInUseException)},
		{"ResourceNotFoundException", new(*types.ResourceNotFoundException)},
		{"LimitExceededException", new(*types.LimitExceededException)},
	} {
		t.Run(tc.exception, func(t *testing.T) {
			up := &fakeUpstream{frames: []fakeFrame{exceptionFrame(tc.exception, "busy shard")}}
			client := testClient(EFOProxy(t, up.start(t)))
			_, err := client.SubscribeToShard(ctx, subscribeInput(), ownEventStreamCodec, func(o *kinesis.Options) { o.RetryMaxAttempts = 1 })
			if !errors.As(err, tc.target) {
				t.Fatalf("got %v (%T), want %s", err, err, tc.exception)
			}
			if !strings.Contains(err.Error(), "busy shard") {
				t.Errorf("error %q lost the upstream message", err)
			}
		})
	}
}

func TestEFOProxyPassesMidStreamExceptionThrough(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	up := &fakeUpstream{frames: []fakeFrame{eventFrame("1", "a"), exceptionFrame("ResourceInUseException", "taken over")}}
	out, err := testClient(EFOProxy(t, up.start(t))).SubscribeToShard(ctx, subscribeInput(), ownEventStreamCodec)
	if err != nil {
		t.Fatal(err)
	}
	stream := out.GetStream()
	defer stream.Close()
	n := 0
	for range stream.Events() {
		n++
	}
	var inUse *types.ResourceInUseException
	if n != 1 || !errors.As(stream.Err(), &inUse) {
		t.Fatalf("got %d events and error %v, want 1 event then ResourceInUseException", n, stream.Err())
	}
}

func TestEFOProxyCancelsUpstreamWhenClientCloses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	up := &fakeUpstream{frames: []fakeFrame{eventFrame("1", "a")}, hold: make(chan struct{})}
	out, err := testClient(EFOProxy(t, up.start(t))).SubscribeToShard(ctx, subscribeInput(), ownEventStreamCodec)
	if err != nil {
		t.Fatal(err)
	}
	stream := out.GetStream()
	select {
	case <-stream.Events():
	case <-ctx.Done():
		t.Fatal("no first event")
	}
	stream.Close()
	select {
	case <-up.ended:
	case <-ctx.Done():
		t.Fatal("upstream subscription still open after the client closed its stream")
	}
}

func TestEFOProxyPassesOtherRequestsThrough(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	up := &fakeUpstream{}
	out, err := testClient(EFOProxy(t, up.start(t))).ListStreams(ctx, &kinesis.ListStreamsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-up.target; got != "Kinesis_20131202.ListStreams" {
		t.Errorf("upstream saw target %q", got)
	}
	if b, _ := json.Marshal(out.StreamNames); string(b) != `["s"]` {
		t.Errorf("got stream names %s", b)
	}
}

// TestEFOProxyCloseEndsOpenSubscriptions checks that a proxy ending with its
// test ends the subscriptions still open through it, upstream and client side.
// The proxy cuts the client's connection; aws-sdk-go-v2 (smithy-go v1.28.9)
// then ends the stream with a nil Err over HTTP/1.1 and HTTP/2 alike.
func TestEFOProxyCloseEndsOpenSubscriptions(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			up := &fakeUpstream{frames: []fakeFrame{eventFrame("1", "a")}, hold: make(chan struct{})}
			upstream := up.start(t)
			var stream *kinesis.SubscribeToShardEventStream
			t.Run("subscribe", func(t *testing.T) {
				client := testClient(EFOProxy(t, upstream))
				if h2 {
					tr := &http.Transport{Protocols: new(http.Protocols)}
					tr.Protocols.SetUnencryptedHTTP2(true)
					client = kinesis.New(client.Options(), func(o *kinesis.Options) { o.HTTPClient = &http.Client{Transport: tr} })
				}
				out, err := client.SubscribeToShard(ctx, subscribeInput(), ownEventStreamCodec)
				if err != nil {
					t.Fatal(err)
				}
				stream = out.GetStream()
				<-stream.Events()
			}) // the proxy closes here
			if stream == nil {
				t.FailNow()
			}
			defer stream.Close()
			select {
			case <-up.ended:
			case <-ctx.Done():
				t.Fatal("upstream subscription still open after the proxy closed")
			}
			for {
				select {
				case _, ok := <-stream.Events():
					if ok {
						t.Fatal("event after the proxy closed")
					}
					t.Logf("client stream ended, Err: %v", stream.Err())
					return
				case <-ctx.Done():
					t.Fatal("client stream still open after the proxy closed")
				}
			}
		})
	}
}

// TestEFOProxyBrokenUpstream checks that an upstream connection broken
// inside a frame ends the client's stream, after the whole frames before it,
// and not cleanly where the protocol can say so: over HTTP/2 the SDK reports
// the reset stream; over HTTP/1.1 the cut connection ends the stream with a
// nil Err (smithy-go v1.28.9 takes an unexpected EOF for the end of stream).
func TestEFOProxyBrokenUpstream(t *testing.T) {
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http2=%v", h2), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			up := &fakeUpstream{frames: []fakeFrame{eventFrame("1", "a")}, cut: true}
			client := testClient(EFOProxy(t, up.start(t)))
			if h2 {
				tr := &http.Transport{Protocols: new(http.Protocols)}
				tr.Protocols.SetUnencryptedHTTP2(true)
				client = kinesis.New(client.Options(), func(o *kinesis.Options) { o.HTTPClient = &http.Client{Transport: tr} })
			}
			out, err := client.SubscribeToShard(ctx, subscribeInput(), ownEventStreamCodec)
			if err != nil {
				t.Fatal(err)
			}
			stream := out.GetStream()
			defer stream.Close()
			n := 0
			for range stream.Events() {
				n++
			}
			t.Logf("%d events, Err: %v", n, stream.Err())
			if n != 1 {
				t.Fatalf("got %d events, want the 1 whole one", n)
			}
			if h2 && stream.Err() == nil {
				t.Fatal("HTTP/2 stream ended cleanly; want the reset reported")
			}
		})
	}
}
