package kinesisfake

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/aws/smithy-go/eventstream"
)

// The frames must decode with the SDK's own event stream decoder, CRCs
// included.
func TestFramesDecodeWithSDKDecoder(t *testing.T) {
	sh := &shard{id: "shardId-000000000001", startStr: "0", endStr: "9"}
	child := &shard{id: "shardId-000000000002", parent: sh.id, startStr: "0", endStr: "9"}
	res := readResult{
		records: []record{{seq: "123", pk: "p\"k\n", data: []byte{0, 1, 2}}},
		cont:    "123",
		millis:  42,
	}
	end := readResult{atEnd: true, children: []*shard{child}}

	cases := []struct {
		name    string
		frame   []byte
		headers map[string]string
		payload string
	}{
		{"initial-response", initialResponseFrame(),
			map[string]string{":event-type": "initial-response", ":message-type": "event", ":content-type": "application/json"}, `{}`},
		{"exception", exceptionFrame("ResourceInUseException", "taken \"over\""),
			map[string]string{":exception-type": "ResourceInUseException", ":message-type": "exception"}, `{"message":"taken \"over\""}`},
		{"event", appendEventFrame(nil, &res),
			map[string]string{":event-type": "SubscribeToShardEvent", ":message-type": "event"},
			`{"Records":[{"SequenceNumber":"123","ApproximateArrivalTimestamp":-62135596800.000,"Data":"AAEC","PartitionKey":"p\"k\n"}],"ContinuationSequenceNumber":"123","MillisBehindLatest":42}`},
		{"end event", appendEventFrame(nil, &end),
			map[string]string{":event-type": "SubscribeToShardEvent"},
			`{"Records":[],"ContinuationSequenceNumber":null,"MillisBehindLatest":0,"ChildShards":[{"ShardId":"shardId-000000000002","ParentShards":["shardId-000000000001"],"HashKeyRange":{"StartingHashKey":"0","EndingHashKey":"9"}}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			msg, err := eventstream.NewDecoder().Decode(bytes.NewReader(tc.frame), nil)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			for k, v := range tc.headers {
				if got := msg.Headers.Get(k); got == nil || got.String() != v {
					t.Errorf("header %s = %v, want %q", k, got, v)
				}
			}
			if string(msg.Payload) != tc.payload {
				t.Errorf("payload\n got %s\nwant %s", msg.Payload, tc.payload)
			}
			if !json.Valid(msg.Payload) {
				t.Errorf("payload is not valid JSON")
			}
		})
	}
}

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "quo\"te", "back\\slash", "\x00\x1f\t\r\n", "ünïcødé 😀", "bad\xffutf8", "<html>&"} {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, got, err)
		}
		want := s
		if s == "bad\xffutf8" {
			want = "bad\ufffdutf8"
		}
		if back != want {
			t.Errorf("%q round-trips to %q", s, back)
		}
	}
}
