package kinesisfake

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// Regression: the SDK's own HTTP client against the plain HTTP/1.1 listener.
// Before bodyShield and the HTTP/1.1 grace pause, about 1 in 100 large
// responses failed with "deserialization failed ... use of closed network
// connection": net/http reads the request body once more after sending it,
// the SDK had already closed it because the answer was back, and the
// transport tore the connection down under the answer being read.
func TestSDKDefaultClientOverHTTP1(t *testing.T) {
	s := newServer(t, Stream("big", 300), Quotas(false))
	for name, c := range map[string]*kinesis.Client{
		"sdk default client": newClient(s, func(o *kinesis.Options) { o.HTTPClient = awshttp.NewBuildableClient() }),
		"HTTPClient":         newClient(s),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := testCtx(t)
			// Pages of 150 shards: about 50 KB, more than the client buffers.
			page := aws.Int32(150)
			in := &kinesis.ListShardsInput{StreamName: aws.String("big"), MaxResults: page}
			for i := range 300 {
				out, err := c.ListShards(ctx, in)
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				in = &kinesis.ListShardsInput{NextToken: out.NextToken, MaxResults: page}
				if out.NextToken == nil {
					in = &kinesis.ListShardsInput{StreamName: aws.String("big"), MaxResults: page}
				}
			}
		})
	}
}
