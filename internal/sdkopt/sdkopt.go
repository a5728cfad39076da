// Package sdkopt holds options for aws-sdk-go-v2 Kinesis calls that work
// around defects of the SDK, shared by the fan-out publisher, the benchmark
// baselines and the fake's tests.
package sdkopt

import (
	"github.com/aws/aws-sdk-go-v2/service/kinesis"
	"github.com/aws/aws-sdk-go-v2/service/kinesis/schemas"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
)

// OwnProtocol gives a SubscribeToShard call a protocol instance of its own.
// The client's shared one keeps unguarded scratch state in its event stream
// codec, used by every open stream at once (aws/smithy-go issue 714, seen with
// smithy-go v1.28.9): a data race with many shards subscribed on one client.
func OwnProtocol(o *kinesis.Options) {
	o.Protocol = awsjson.New11(schemas.Kinesis_20131202)
}
