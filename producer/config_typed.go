package producer

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// typedValue is a property whose value has a Go type T, so a typed option
// sets it as T, not as text: NewFromProperties and Property parse Java's
// text (setText), a typed option hands T over (option), and both go
// through check, the row's one validator, and store. row makes the
// table's entry, so the name is written once.
type typedValue[T any] struct {
	name  string
	parse func(v string) (T, bool) // Java's text; false when it is not of the property's syntax
	check func(T) error            // the row's validator, its reason phrased in T's terms
	store func(*config, T)
	// textReason is the text path's reason for any value parse or check
	// refuses, in the property's own units (milliseconds, bytes).
	textReason string
	format     func(T) string // T as Go prints it, for ConfigError.Value
}

func (r *typedValue[T]) row(def, doc string) property {
	return property{r.name, def, doc, r.setText}
}

func (r *typedValue[T]) setText(c *config, v string) error {
	x, ok := r.parse(v)
	if !ok || r.check(x) != nil {
		return errors.New(r.textReason)
	}
	r.store(c, x)
	return nil
}

// option is the typed option named option that sets r to v. An invalid v
// is a ConfigError naming the option and the property, with v as Go
// writes it; it overrides either spelling of a property, as setOption.
func (r *typedValue[T]) option(option string, v T) Opt {
	return optFunc(func(c *config) error {
		if err := r.check(v); err != nil {
			return &ConfigError{Property: r.name, Option: option, Value: r.format(v), Reason: err.Error()}
		}
		c.aliasGiven = nil
		r.store(c, v)
		return nil
	})
}

// intValue is an integer property between lo and hi.
func intValue(name string, lo, hi int64, store func(*config, int64)) *typedValue[int64] {
	return &typedValue[int64]{
		name: name,
		parse: func(v string) (int64, bool) {
			n, err := strconv.ParseInt(v, 10, 64)
			return n, err == nil
		},
		check: func(n int64) error {
			if n < lo || n > hi {
				return fmt.Errorf("must be between %d and %d", lo, hi)
			}
			return nil
		},
		store:      store,
		textReason: fmt.Sprintf("must be an integer between %d and %d", lo, hi),
		format:     func(n int64) string { return strconv.FormatInt(n, 10) },
	}
}

// durationValue is a *.ms property: whole milliseconds between loMs and
// math.MaxInt32 as text (Java's int), any time.Duration in that range from
// a typed option, kept as given, below a millisecond too.
func durationValue(name string, loMs int64, store func(*config, time.Duration)) *typedValue[time.Duration] {
	lo, hi := time.Duration(loMs)*time.Millisecond, time.Duration(math.MaxInt32)*time.Millisecond
	return &typedValue[time.Duration]{
		name: name,
		parse: func(v string) (time.Duration, bool) {
			n, err := strconv.ParseInt(v, 10, 64)
			// Out of int32, n*ms could overflow into the range.
			if err != nil || n < math.MinInt32 || n > math.MaxInt32 {
				return 0, false
			}
			return time.Duration(n) * time.Millisecond, true
		},
		check: func(d time.Duration) error {
			if d < lo || d > hi {
				return fmt.Errorf("must be between %v and %v", lo, hi)
			}
			return nil
		},
		store:      store,
		textReason: fmt.Sprintf("must be an integer number of milliseconds between %d and %d", loMs, math.MaxInt32),
		format:     time.Duration.String,
	}
}
