package polling

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/kinesis"
)

// API is the part of the Kinesis client the polling publisher calls;
// *kinesis.Client satisfies it.
type API interface {
	GetShardIterator(ctx context.Context, in *kinesis.GetShardIteratorInput, optFns ...func(*kinesis.Options)) (*kinesis.GetShardIteratorOutput, error)
	GetRecords(ctx context.Context, in *kinesis.GetRecordsInput, optFns ...func(*kinesis.Options)) (*kinesis.GetRecordsOutput, error)
}
