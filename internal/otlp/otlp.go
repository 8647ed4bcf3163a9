// Package otlp writes and reads the small part of OpenTelemetry's metrics
// protocol (opentelemetry-proto, metrics/v1 MetricsData) that client
// metrics push (KIP-714) needs: one resource with string attributes, one
// instrumentation scope, and gauges and sums of int or double points with
// string attributes.
//
// It is written by hand rather than generated: the subset is a few
// dozen lines of protobuf wire format, and the generated package with its
// runtime (google.golang.org/protobuf) would be the core module's largest
// dependency for one request type. Decode exists for the embedded broker
// and tests, which check what a producer pushed; it skips fields it does
// not know, as protobuf readers do.
package otlp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Kind is a metric's data type.
type Kind uint8

const (
	Gauge Kind = iota + 1 // a value at a time
	Sum                   // a running total (Monotonic) or an up-down sum
)

// Attr is a string attribute.
type Attr struct{ Key, Value string }

// Point is one data point: an int or a double value at Time, summed since
// Start for a Sum.
type Point struct {
	Attrs       []Attr
	Start, Time uint64 // Unix nanoseconds
	IsDouble    bool
	Int         int64
	Double      float64
}

// Metric is one named metric and its points.
type Metric struct {
	Name, Description, Unit string
	Kind                    Kind
	// For a Sum: Monotonic (only grows) and Delta (each point covers
	// Start to Time only; else cumulative since Start).
	Monotonic, Delta bool
	Points           []Point
}

// Payload is a MetricsData message with one ResourceMetrics holding one
// ScopeMetrics.
type Payload struct {
	Resource     []Attr
	Scope        string
	ScopeVersion string
	Metrics      []Metric
}

// Field numbers of the messages written (opentelemetry-proto v1).
const (
	fMetricsDataResource = 1 // MetricsData.resource_metrics
	fRMResource          = 1 // ResourceMetrics.resource
	fRMScope             = 2 // ResourceMetrics.scope_metrics
	fResourceAttrs       = 1 // Resource.attributes
	fSMScope             = 1 // ScopeMetrics.scope
	fSMMetrics           = 2 // ScopeMetrics.metrics
	fScopeName           = 1 // InstrumentationScope.name
	fScopeVersion        = 2 // InstrumentationScope.version
	fMetricName          = 1
	fMetricDesc          = 2
	fMetricUnit          = 3
	fMetricGauge         = 5
	fMetricSum           = 7
	fDataPoints          = 1 // Gauge.data_points, Sum.data_points
	fSumTemporality      = 2
	fSumMonotonic        = 3
	fPointStart          = 2 // fixed64
	fPointTime           = 3 // fixed64
	fPointDouble         = 4 // double
	fPointInt            = 6 // sfixed64
	fPointAttrs          = 7
	fKVKey               = 1
	fKVValue             = 2
	fAnyString           = 1

	temporalityDelta      = 1
	temporalityCumulative = 2
)

// Wire types.
const (
	wVarint  = 0
	wFixed64 = 1
	wBytes   = 2
	wFixed32 = 5
)

func tag(b []byte, field, wire int) []byte { return binary.AppendUvarint(b, uint64(field<<3|wire)) }

func appendString(b []byte, field int, s string) []byte {
	if s == "" {
		return b
	}
	b = tag(b, field, wBytes)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// appendMessage appends field as a length-delimited message written by f.
func appendMessage(b []byte, field int, f func([]byte) []byte) []byte {
	b = tag(b, field, wBytes)
	body := f(nil)
	b = binary.AppendUvarint(b, uint64(len(body)))
	return append(b, body...)
}

func appendAttrs(b []byte, field int, attrs []Attr) []byte {
	for _, a := range attrs {
		b = appendMessage(b, field, func(kv []byte) []byte {
			kv = appendString(kv, fKVKey, a.Key)
			return appendMessage(kv, fKVValue, func(v []byte) []byte {
				// An empty string is still a string value: write the field.
				v = tag(v, fAnyString, wBytes)
				v = binary.AppendUvarint(v, uint64(len(a.Value)))
				return append(v, a.Value...)
			})
		})
	}
	return b
}

func appendPoint(b []byte, p Point) []byte {
	b = tag(b, fPointStart, wFixed64)
	b = binary.LittleEndian.AppendUint64(b, p.Start)
	b = tag(b, fPointTime, wFixed64)
	b = binary.LittleEndian.AppendUint64(b, p.Time)
	if p.IsDouble {
		b = tag(b, fPointDouble, wFixed64)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(p.Double))
	} else {
		b = tag(b, fPointInt, wFixed64)
		b = binary.LittleEndian.AppendUint64(b, uint64(p.Int))
	}
	return appendAttrs(b, fPointAttrs, p.Attrs)
}

func appendMetric(b []byte, m Metric) []byte {
	b = appendString(b, fMetricName, m.Name)
	b = appendString(b, fMetricDesc, m.Description)
	b = appendString(b, fMetricUnit, m.Unit)
	points := func(d []byte) []byte {
		for _, p := range m.Points {
			d = appendMessage(d, fDataPoints, func(pb []byte) []byte { return appendPoint(pb, p) })
		}
		return d
	}
	switch m.Kind {
	case Gauge:
		b = appendMessage(b, fMetricGauge, points)
	case Sum:
		b = appendMessage(b, fMetricSum, func(d []byte) []byte {
			d = points(d)
			d = tag(d, fSumTemporality, wVarint)
			t := uint64(temporalityCumulative)
			if m.Delta {
				t = temporalityDelta
			}
			d = binary.AppendUvarint(d, t)
			if m.Monotonic {
				d = tag(d, fSumMonotonic, wVarint)
				d = append(d, 1)
			}
			return d
		})
	}
	return b
}

// Encode returns p as a serialized MetricsData message.
func Encode(p Payload) []byte {
	return appendMessage(nil, fMetricsDataResource, func(rm []byte) []byte {
		rm = appendMessage(rm, fRMResource, func(r []byte) []byte { return appendAttrs(r, fResourceAttrs, p.Resource) })
		return appendMessage(rm, fRMScope, func(sm []byte) []byte {
			sm = appendMessage(sm, fSMScope, func(s []byte) []byte {
				s = appendString(s, fScopeName, p.Scope)
				return appendString(s, fScopeVersion, p.ScopeVersion)
			})
			for _, m := range p.Metrics {
				sm = appendMessage(sm, fSMMetrics, func(mb []byte) []byte { return appendMetric(mb, m) })
			}
			return sm
		})
	})
}

// ErrMalformed is wrapped by every Decode error.
var ErrMalformed = errors.New("otlp: malformed MetricsData")

// field is one decoded protobuf field: its number, wire type, and its
// value (varint and fixed values in n, length-delimited ones in data).
type field struct {
	num, wire int
	n         uint64
	data      []byte
}

// fields splits b into its top-level fields, calling f for each.
func fields(b []byte, f func(field) error) error {
	for len(b) > 0 {
		key, k := binary.Uvarint(b)
		if k <= 0 {
			return fmt.Errorf("%w: bad field key", ErrMalformed)
		}
		b = b[k:]
		fd := field{num: int(key >> 3), wire: int(key & 7)}
		if fd.num == 0 || key>>3 > math.MaxInt32 {
			return fmt.Errorf("%w: field number %d", ErrMalformed, key>>3)
		}
		switch fd.wire {
		case wVarint:
			v, k := binary.Uvarint(b)
			if k <= 0 {
				return fmt.Errorf("%w: bad varint", ErrMalformed)
			}
			fd.n, b = v, b[k:]
		case wFixed64:
			if len(b) < 8 {
				return fmt.Errorf("%w: short fixed64", ErrMalformed)
			}
			fd.n, b = binary.LittleEndian.Uint64(b), b[8:]
		case wFixed32:
			if len(b) < 4 {
				return fmt.Errorf("%w: short fixed32", ErrMalformed)
			}
			fd.n, b = uint64(binary.LittleEndian.Uint32(b)), b[4:]
		case wBytes:
			l, k := binary.Uvarint(b)
			if k <= 0 || l > uint64(len(b)-k) {
				return fmt.Errorf("%w: bad length", ErrMalformed)
			}
			fd.data, b = b[k:k+int(l)], b[k+int(l):]
		default:
			return fmt.Errorf("%w: wire type %d", ErrMalformed, fd.wire)
		}
		if err := f(fd); err != nil {
			return err
		}
	}
	return nil
}

// bytes returns fd's data, or an error if fd is not length-delimited.
func (fd field) bytes() ([]byte, error) {
	if fd.wire != wBytes {
		return nil, fmt.Errorf("%w: field %d has wire type %d, want bytes", ErrMalformed, fd.num, fd.wire)
	}
	return fd.data, nil
}

func decodeAttr(b []byte) (Attr, error) {
	var a Attr
	err := fields(b, func(fd field) error {
		d, err := fd.bytes()
		if err != nil {
			return err
		}
		switch fd.num {
		case fKVKey:
			a.Key = string(d)
		case fKVValue:
			return fields(d, func(v field) error {
				if v.num == fAnyString {
					s, err := v.bytes()
					a.Value = string(s)
					return err
				}
				return nil
			})
		}
		return nil
	})
	return a, err
}

func decodePoint(b []byte) (Point, error) {
	var p Point
	err := fields(b, func(fd field) error {
		switch fd.num {
		case fPointStart:
			p.Start = fd.n
		case fPointTime:
			p.Time = fd.n
		case fPointDouble:
			p.IsDouble, p.Double = true, math.Float64frombits(fd.n)
		case fPointInt:
			p.IsDouble, p.Int = false, int64(fd.n)
		case fPointAttrs:
			d, err := fd.bytes()
			if err != nil {
				return err
			}
			a, err := decodeAttr(d)
			if err != nil {
				return err
			}
			p.Attrs = append(p.Attrs, a)
		}
		return nil
	})
	return p, err
}

func decodeMetric(b []byte) (Metric, error) {
	var m Metric
	err := fields(b, func(fd field) error {
		switch fd.num {
		case fMetricName, fMetricDesc, fMetricUnit:
			d, err := fd.bytes()
			if err != nil {
				return err
			}
			switch fd.num {
			case fMetricName:
				m.Name = string(d)
			case fMetricDesc:
				m.Description = string(d)
			default:
				m.Unit = string(d)
			}
		case fMetricGauge, fMetricSum:
			d, err := fd.bytes()
			if err != nil {
				return err
			}
			m.Kind = Gauge
			if fd.num == fMetricSum {
				m.Kind = Sum
			}
			return fields(d, func(g field) error {
				switch g.num {
				case fDataPoints:
					pd, err := g.bytes()
					if err != nil {
						return err
					}
					p, err := decodePoint(pd)
					if err != nil {
						return err
					}
					m.Points = append(m.Points, p)
				case fSumTemporality:
					m.Delta = g.n == temporalityDelta
				case fSumMonotonic:
					m.Monotonic = g.n != 0
				}
				return nil
			})
		}
		return nil
	})
	return m, err
}

// Decode reads a serialized MetricsData message; the resource attributes,
// scopes and metrics of all its ResourceMetrics are merged into one
// Payload (Scope is the first scope's name).
func Decode(b []byte) (Payload, error) {
	var p Payload
	err := fields(b, func(fd field) error {
		if fd.num != fMetricsDataResource {
			return nil
		}
		d, err := fd.bytes()
		if err != nil {
			return err
		}
		return fields(d, func(rm field) error {
			if rm.num != fRMResource && rm.num != fRMScope {
				return nil
			}
			d, err := rm.bytes()
			if err != nil {
				return err
			}
			switch rm.num {
			case fRMResource:
				return fields(d, func(r field) error {
					if r.num != fResourceAttrs {
						return nil
					}
					ad, err := r.bytes()
					if err != nil {
						return err
					}
					a, err := decodeAttr(ad)
					p.Resource = append(p.Resource, a)
					return err
				})
			case fRMScope:
				return fields(d, func(sm field) error {
					if sm.num != fSMScope && sm.num != fSMMetrics {
						return nil
					}
					d, err := sm.bytes()
					if err != nil {
						return err
					}
					switch sm.num {
					case fSMScope:
						return fields(d, func(s field) error {
							if s.num != fScopeName && s.num != fScopeVersion {
								return nil
							}
							v, err := s.bytes()
							if p.Scope == "" && s.num == fScopeName {
								p.Scope = string(v)
							}
							if p.ScopeVersion == "" && s.num == fScopeVersion {
								p.ScopeVersion = string(v)
							}
							return err
						})
					case fSMMetrics:
						m, err := decodeMetric(d)
						if err != nil {
							return err
						}
						p.Metrics = append(p.Metrics, m)
					}
					return nil
				})
			}
			return nil
		})
	})
	return p, err
}
