package kafkatest

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func sent(spec ...string) []Sent {
	// "a" acked, "a?" maybe written, "a!" not written.
	out := make([]Sent, len(spec))
	for i, s := range spec {
		switch {
		case strings.HasSuffix(s, "?"):
			out[i] = Sent{Value: []byte(s[:len(s)-1]), Outcome: MaybeWritten}
		case strings.HasSuffix(s, "!"):
			out[i] = Sent{Value: []byte(s[:len(s)-1]), Outcome: NotWritten}
		default:
			out[i] = Sent{Value: []byte(s), Outcome: Acked}
		}
	}
	return out
}

// TestCheckDelivered is the negative control of the checker the longhaul
// interop tests rely on: every broken log (what a non-idempotent or buggy
// producer would leave) must be reported, and every legal one accepted.
func TestCheckDelivered(t *testing.T) {
	for _, tc := range []struct {
		name    string
		sent    []Sent
		log     []string
		wantErr string // "" = must pass
		want    DeliveryReport
	}{
		{name: "exact", sent: sent("a", "b", "c"), log: []string{"a", "b", "c"}, want: DeliveryReport{Acked: 3}},
		{name: "maybe present", sent: sent("a", "b?", "c"), log: []string{"a", "b", "c"}, want: DeliveryReport{Acked: 2, MaybePresent: 1}},
		{name: "maybe absent", sent: sent("a", "b?", "c?"), log: []string{"a"}, want: DeliveryReport{Acked: 1, MaybeAbsent: 2}},
		{name: "not written absent", sent: sent("a", "b!", "c"), log: []string{"a", "c"}, want: DeliveryReport{Acked: 2, NotWritten: 1}},
		{name: "duplicate", sent: sent("a", "b", "c"), log: []string{"a", "b", "b", "c"}, wantErr: "duplicate"},
		{name: "maybe duplicated", sent: sent("a", "b?"), log: []string{"a", "b", "b"}, wantErr: "duplicate"},
		{name: "retry appended later", sent: sent("a", "b", "c"), log: []string{"a", "b", "c", "a"}, wantErr: "duplicate"},
		{name: "lost middle", sent: sent("a", "b", "c"), log: []string{"a", "c"}, wantErr: "lost"},
		{name: "lost tail", sent: sent("a", "b", "c"), log: []string{"a", "b"}, wantErr: "lost"},
		{name: "reordered", sent: sent("a", "b", "c"), log: []string{"a", "c", "b"}, wantErr: "missing"},
		{name: "maybe reordered", sent: sent("a", "b?", "c"), log: []string{"a", "c", "b"}, wantErr: "reordered"},
		{name: "not written present", sent: sent("a", "b!"), log: []string{"a", "b"}, wantErr: "not written"},
		{name: "stray", sent: sent("a"), log: []string{"a", "z"}, wantErr: "stray"},
		{name: "non-unique values", sent: sent("a", "a"), log: []string{"a"}, wantErr: "unique"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := CheckDelivered(map[int32][]Sent{2: tc.sent}, map[int32][]*kgo.Record{2: recs(2, tc.log...)})
			if tc.wantErr == "" {
				if err != nil || rep != tc.want {
					t.Fatalf("got %+v, %v; want %+v, nil", rep, err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
	// A record in a partition nothing was produced to is stray too.
	if _, err := CheckDelivered(map[int32][]Sent{0: sent("a")}, map[int32][]*kgo.Record{0: recs(0, "a"), 1: recs(1, "x")}); err == nil || !strings.Contains(err.Error(), "stray") {
		t.Fatalf("record in an unexpected partition: %v", err)
	}
}
