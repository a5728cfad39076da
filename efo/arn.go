package efo

import (
	"fmt"
	"regexp"
)

// consumerARNRE matches arn:<partition>:kinesis:<region>:<account>:stream/<stream>/consumer/<name>:<creation epoch>.
var consumerARNRE = regexp.MustCompile(`^(arn:aws[a-zA-Z-]*:kinesis:[a-z0-9-]+:[0-9]{12}:stream/([a-zA-Z0-9_.-]{1,128}))/consumer/([a-zA-Z0-9_.-]{1,128}):([0-9]+)$`)

// ConsumerARN is a parsed stream consumer ARN.
type ConsumerARN struct {
	ARN       string
	StreamARN string
	Stream    string // stream name
	Name      string // consumer name
}

// ParseConsumerARN checks that arn is a Kinesis stream consumer ARN and splits
// it into its parts.
func ParseConsumerARN(arn string) (ConsumerARN, error) {
	m := consumerARNRE.FindStringSubmatch(arn)
	if m == nil {
		return ConsumerARN{}, fmt.Errorf("%q is not a stream consumer ARN; expected arn:aws:kinesis:<region>:<12-digit account>:stream/<stream>/consumer/<name>:<creation time>", arn)
	}
	return ConsumerARN{ARN: arn, StreamARN: m[1], Stream: m[2], Name: m[3]}, nil
}
