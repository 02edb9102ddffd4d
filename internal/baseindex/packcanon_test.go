package baseindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// TestPackViewRefusesMovedString: a view whose strings are not where
// writeView puts them is not packed: its records name the bytes at other
// offsets, which the packed form cannot say.
func TestPackViewRefusesMovedString(t *testing.T) {
	b, _ := smallView(t, viewHeaders)
	if _, err := PackView(b); err != nil {
		t.Fatalf("PackView(view) = %v", err)
	}
	lay, err := layoutOf(b, uint64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	// The root's name (empty) said to lie one byte on.
	bad := bytes.Clone(b)
	binary.LittleEndian.PutUint32(bad[lay.head+8:], binary.LittleEndian.Uint32(bad[lay.head+8:])+1)
	if _, err := PackView(bad); !errors.Is(err, errNotCanonical) {
		t.Errorf("PackView(a string moved) = %v, want %v", err, errNotCanonical)
	}
}
