package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// promqlMetricNames returns the metric names a PromQL expression selects,
// sorted and once each: the identifiers that are neither functions nor
// keywords, outside label matchers ({...}), ranges ([...]), strings and
// the label lists of by, without, on, ignoring, group_left and
// group_right. Grafana's variables ($stream, ${x}, $__rate_interval) are
// skipped. It is what the dashboard's queries need, not a whole parser:
// what it cannot read is an error naming the expression.
func promqlMetricNames(expr string) ([]string, error) {
	var names []string
	s := expr
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			i++
		case c == '"' || c == '\'' || c == '`':
			end := strings.IndexByte(s[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("PromQL %q: a string at offset %d is not closed", expr, i)
			}
			i += end + 2
		case c == '{' || c == '[':
			end, err := promqlClosing(s, i)
			if err != nil {
				return nil, fmt.Errorf("PromQL %q: %w", expr, err)
			}
			i = end + 1
		case c == '$':
			i++
			if i < len(s) && s[i] == '{' {
				end := strings.IndexByte(s[i:], '}')
				if end < 0 {
					return nil, fmt.Errorf("PromQL %q: a variable at offset %d is not closed", expr, i-1)
				}
				i += end + 1
				continue
			}
			for i < len(s) && promqlIdentChar(s[i]) {
				i++
			}
		case promqlIdentStart(c):
			j := i
			for j < len(s) && promqlIdentChar(s[j]) {
				j++
			}
			word := s[i:j]
			next := j
			for next < len(s) && s[next] == ' ' {
				next++
			}
			switch {
			case slices.Contains(labelListKeywords, strings.ToLower(word)):
				// by (a, b): skip the label list, if any (group_left may
				// have none).
				if next < len(s) && s[next] == '(' {
					end, err := promqlClosing(s, next)
					if err != nil {
						return nil, fmt.Errorf("PromQL %q: %w", expr, err)
					}
					j = end + 1
				}
			case slices.Contains(operatorKeywords, strings.ToLower(word)), slices.Contains(aggregations, strings.ToLower(word)):
				// An aggregation may have its by clause before its
				// parenthesis: sum by (l) (x).
			case next < len(s) && s[next] == '(':
				// A function or an aggregation; its arguments follow.
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
			i = j
		case c >= '0' && c <= '9' || c == '.':
			// A number or a duration: 2, 1e3, 0x1f, 5m.
			for i < len(s) && (promqlIdentChar(s[i]) || s[i] == '.') {
				i++
			}
		default:
			i++ // an operator, a parenthesis, a comma
		}
	}
	slices.Sort(names)
	return names, nil
}

var (
	labelListKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}
	operatorKeywords  = []string{"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}
	aggregations      = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
)

// promqlClosing is the index of the bracket that closes the one at s[i], past
// strings within.
func promqlClosing(s string, i int) (int, error) {
	open := s[i]
	shut := map[byte]byte{'{': '}', '[': ']', '(': ')'}[open]
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '"', '\'', '`':
			end := strings.IndexByte(s[j+1:], s[j])
			if end < 0 {
				return 0, fmt.Errorf("a string at offset %d is not closed", j)
			}
			j += end + 1
		case open:
			depth++
		case shut:
			if depth--; depth == 0 {
				return j, nil
			}
		}
	}
	return 0, fmt.Errorf("%q at offset %d is not closed", open, i)
}

func promqlIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func promqlIdentChar(c byte) bool { return promqlIdentStart(c) || c >= '0' && c <= '9' }

// TestPromQLMetricNames: the names of the dashboard's kinds of queries,
// and none of their labels, functions, keywords or variables.
func TestPromQLMetricNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`max by (stream) (kinesis_stream_millis_behind_latest{stream=~"$stream"})`, []string{"kinesis_stream_millis_behind_latest"}},
		{`sum by (instance, pod) (rate(kinesis_records_read{stream=~"$stream"}[$__rate_interval]))`, []string{"kinesis_records_read"}},
		{`sum(increase(kinesis_lease_moves{stream=~"a|b", cause!="free"}[5m] offset 1m)) by (cause)`, []string{"kinesis_lease_moves"}},
		{`process_resident_memory_bytes and on (instance) kinesis_bytes_in_flight`, []string{"kinesis_bytes_in_flight", "process_resident_memory_bytes"}},
		{`a / on (x) group_left b * 2 > bool 1e3`, []string{"a", "b"}},
		{`max(kinesis_stream_millis_behind_latest{stream="orders"})`, []string{"kinesis_stream_millis_behind_latest"}},
		{`topk(5, x{l="}"}) unless ${y}`, []string{"x"}},
	} {
		got, err := promqlMetricNames(c.expr)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("promqlMetricNames(%q) = %q, %v; want %q", c.expr, got, err, c.want)
		}
	}
	for _, bad := range []string{`sum(x{l="a)`, `rate(x[5m)`} {
		if got, err := promqlMetricNames(bad); err == nil {
			t.Errorf("promqlMetricNames(%q) = %q, want an error", bad, got)
		}
	}
}
