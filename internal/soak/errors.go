package soak

import (
	"errors"
	"fmt"
)

// ErrCheckFailed is wrapped by the [*CheckError] of [Result.Err]: the
// soak ran to its end but a check found a problem.
var ErrCheckFailed = errors.New("soak: check failed")

// ErrInvalidConfig is wrapped by every configuration error from [Run].
var ErrInvalidConfig = errors.New("soak: invalid config")

// CheckError reports a soak whose checks failed: the summary line and the
// first problems found.
type CheckError struct {
	// Line is [Result.String] of the failed run, seed included.
	Line string
	// Problems are the first problems found, one line each.
	Problems []string
}

// Error implements error.
func (e *CheckError) Error() string {
	return fmt.Sprintf("%v: %s; reproduce with LONGHAUL_SOAK_SEED (first problems: %q)", ErrCheckFailed, e.Line, e.Problems)
}

// Unwrap returns [ErrCheckFailed].
func (e *CheckError) Unwrap() error { return ErrCheckFailed }
