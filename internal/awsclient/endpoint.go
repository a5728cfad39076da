package awsclient

import (
	"fmt"
	"net/url"
	"regexp"
)

// CheckEndpoint checks a custom endpoint URL: http or https, with a host.
// Its error says what was expected (callers add the field or flag); the
// value in it has its password redacted.
func CheckEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q: expected an http or https URL such as http://127.0.0.1:4568 or https://kinesis.us-east-1.amazonaws.com", RedactURL(endpoint))
	}
	return nil
}

// regionRE is what an AWS region can be: lower-case words of letters and
// digits joined by '-' (us-east-1, us-gov-west-1), at most a DNS label long,
// since the SDK puts it into host names.
var regionRE = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// CheckRegion checks the form of a region name (not that AWS has it).
func CheckRegion(region string) error {
	if len(region) > 63 || !regionRE.MatchString(region) {
		return fmt.Errorf("%q: expected an AWS region such as us-east-1 (lower-case letters, digits and '-')", region)
	}
	return nil
}

// userinfoRE finds the user information of a URL that url.Parse refused.
var userinfoRE = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@]*@`)

// RedactURL returns endpoint with the password of its user information
// replaced, for errors, logs and output: an endpoint may carry one
// (http://user:secret@host), and the SDK never needs it (requests are signed
// with the AWS credentials).
func RedactURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.User == nil {
		// Without a password to hide, as given: the URL's own form would
		// escape it (not a url read not%20a%20url).
		return userinfoRE.ReplaceAllString(endpoint, "${1}xxxxx@")
	}
	if _, has := u.User.Password(); !has {
		return endpoint
	}
	return u.Redacted()
}
