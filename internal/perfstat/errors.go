package perfstat

import "errors"

// ErrNotSummary is returned by [ParseSummary] for a line that is not a
// summary line in the shape [Summary.String] prints.
var ErrNotSummary = errors.New("perfstat: not a summary line")
