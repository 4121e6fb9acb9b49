// Package pullerr builds the errors of a pull that ended with its context:
// a one-line PULL_TIMEOUT *domain.Error for the report's last_error that
// still matches the context's error, so the fire loop classifies it as a
// timeout. It knows nothing of protocols or engines.
package pullerr
