package emulator

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Static fake credentials the emulators accept (they check that requests are
// signed, not by whom). Tests that configure the product through YAML use
// these as credentials.id and credentials.secret.
const (
	AccessKeyID     = "AKIDEMULATOR"
	SecretAccessKey = "emulator-secret"
)

// Credentials returns a provider of the static fake credentials.
func Credentials() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(AccessKeyID, SecretAccessKey, "")
}
