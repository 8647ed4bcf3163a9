package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestBuildInPlaceMatchesKmsg: BuildInPlace gives kmsg's bytes for every
// record set, codec and header, on a fresh and on a reused builder, and
// leaves the builder as Build would (a Build afterwards is identical).
func TestBuildInPlaceMatchesKmsg(t *testing.T) {
	h := BatchHeader{ProducerID: 12, ProducerEpoch: 11, BaseSequence: 10, Transactional: true}
	var reused BatchBuilder
	for name, recs := range recordSets() {
		for _, c := range allCodecs {
			h.Compression = c
			t.Run(fmt.Sprintf("%s/%s", name, c), func(t *testing.T) {
				want := kmsgBatch(t, recs, h)
				var fresh BatchBuilder
				for _, b := range []*BatchBuilder{&fresh, &reused} {
					b.Reset()
					for _, r := range recs {
						b.Append(r.ts, r.key, r.value, r.headers)
					}
					got, err := b.BuildInPlace(h)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("BuildInPlace differs from kmsg\n got %x\nwant %x", got, want)
					}
					if len(got) != RecordBatchOverhead+b.EncodedLen() && c == CodecNone {
						t.Fatalf("%d bytes, EncodedLen %d", len(got), b.EncodedLen())
					}
					again, err := b.Build(nil, h)
					if err != nil || !bytes.Equal(again, want) {
						t.Fatalf("Build after BuildInPlace: %v", err)
					}
				}
			})
		}
	}
}

// TestBuildInPlaceNoCopy: uncompressed, the batch is the builder's own
// buffer (no copy, no allocation once warm); Build's result never is.
func TestBuildInPlaceNoCopy(t *testing.T) {
	var b BatchBuilder
	val := bytes.Repeat([]byte("v"), 1024)
	for range 16 {
		b.Append(1, nil, val, nil)
	}
	got, err := b.BuildInPlace(BatchHeader{})
	if err != nil {
		t.Fatal(err)
	}
	if &got[RecordBatchOverhead] != &b.records()[0] {
		t.Fatal("uncompressed BuildInPlace copied the records")
	}
	built, _ := b.Build(nil, BatchHeader{})
	if &built[RecordBatchOverhead] == &b.records()[0] {
		t.Fatal("Build aliases the builder")
	}
	allocs := testing.AllocsPerRun(100, func() {
		b.Reset()
		for range 16 {
			b.Append(1, nil, val, nil)
		}
		if _, err := b.BuildInPlace(BatchHeader{}); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("warm uncompressed BuildInPlace allocates %.1f times", allocs)
	}
}

func TestBuildInPlaceErrors(t *testing.T) {
	var b BatchBuilder
	if out, err := b.BuildInPlace(BatchHeader{}); !errors.Is(err, ErrEmptyBatch) || out != nil {
		t.Fatalf("empty: %v %v", out, err)
	}
	b.Grow(100)
	if b.EncodedLen() != 0 || b.NumRecords() != 0 {
		t.Fatal("Grow added records")
	}
	b.Append(1, nil, []byte("x"), nil)
	if out, err := b.BuildInPlace(BatchHeader{Compression: 9}); !errors.Is(err, ErrUnknownCodec) || out != nil {
		t.Fatalf("bad codec: %v %v", out, err)
	}
}
