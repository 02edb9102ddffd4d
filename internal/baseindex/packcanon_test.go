package baseindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
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

// TestUnpackViewBoundsGroups: a packed view that lists more directory
// groups than its view has records (empty ones cost two bytes each, and
// would each be held) is refused.
func TestUnpackViewBoundsGroups(t *testing.T) {
	b, _ := smallView(t, viewHeaders)
	packed, err := PackView(b)
	if err != nil {
		t.Fatal(err)
	}
	// Split the sections, add 1,000 empty groups, and join them again.
	headLen := int(binary.LittleEndian.Uint32(packed[len(packMagic)+4:]))
	rest := packed[len(packMagic)+8+headLen:]
	var sec [packSections][]byte
	for s := range sec {
		n, m := binary.Uvarint(rest)
		sec[s], rest = rest[m:m+int(n)], rest[m+int(n):]
	}
	sec[secGroups] = append(bytes.Clone(sec[secGroups]), make([]byte, 1000)...)
	sec[secDirLens] = append(bytes.Clone(sec[secDirLens]), make([]byte, 1000)...)
	out := bytes.Clone(packed[:len(packMagic)+8+headLen])
	for _, s := range sec {
		out = binary.AppendUvarint(out, uint64(len(s)))
		out = append(out, s...)
	}
	if _, err := UnpackView(out, 1<<20); err == nil || !strings.Contains(err.Error(), "more directory groups") {
		t.Errorf("UnpackView(1,000 empty groups more) = %v, want an error for the groups", err)
	}
}
