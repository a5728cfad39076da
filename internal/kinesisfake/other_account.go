package kinesisfake

import "encoding/json"

// Behavior: a stream of another account (OtherAccount).
//
// A stream shared across accounts by a resource policy is found only by its
// ARN: a StreamName is looked up in the caller's own account, where the
// stream does not exist, and a call without StreamARN (GetRecords given only
// an iterator) is denied. Consumer calls may name the consumer by its
// ConsumerARN, and a ListShards page after the first by its NextToken
// alone (the token names the stream; kinesis-local refuses a StreamARN
// beside it).

// ownerOps are the stream owner's calls, served whatever names the stream.
var ownerOps = map[string]bool{"CreateStream": true, "ListStreams": true}

// byConsumerARN are the calls that may name a consumer by its ARN instead of
// the stream.
var byConsumerARN = map[string]bool{"DescribeStreamConsumer": true, "DeregisterStreamConsumer": true, opSubscribeToShard: true}

// byARNOnly refuses a call that does not name the stream by its ARN.
func (s *Server) byARNOnly(c *call) *apiError {
	if ownerOps[c.op] {
		return nil
	}
	var in struct{ StreamName, StreamARN, ConsumerARN, NextToken string }
	if err := json.Unmarshal(c.body, &in); err != nil {
		return nil // the operation answers the malformed body itself
	}
	switch {
	case in.StreamName != "":
		return errf(CodeResourceNotFound, "Stream %s under account %s not found (the stream belongs to account %s: name it by its StreamARN).", in.StreamName, callerAccount, s.cfg.acct)
	case in.StreamARN == "" && !(byConsumerARN[c.op] && in.ConsumerARN != "") && !(c.op == "ListShards" && in.NextToken != ""):
		return errf(CodeAccessDenied, "User arn:aws:iam::%s:user/caller is not authorized to perform kinesis:%s on a stream of account %s without its StreamARN.", callerAccount, c.op, s.cfg.acct)
	}
	return nil
}

// callerAccount is the account of the caller of a stream served as another
// account's.
const callerAccount = "999999999999"
