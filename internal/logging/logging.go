// Package logging is the logging the publishers do, as an interface that
// Benthos' *service.Logger satisfies, so that they need not import Benthos.
package logging

// Logger is the logging a publisher does. Benthos' *service.Logger satisfies
// it. Record data is never logged.
type Logger interface {
	Debugf(format string, args ...any)
	Infof(format string, args ...any)
	Warnf(format string, args ...any)
	Errorf(format string, args ...any)
}

// NopLogger discards everything.
type NopLogger struct{}

func (NopLogger) Debugf(string, ...any) {}
func (NopLogger) Infof(string, ...any)  {}
func (NopLogger) Warnf(string, ...any)  {}
func (NopLogger) Errorf(string, ...any) {}
