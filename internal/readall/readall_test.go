package readall

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

func TestSized(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1000)
	for _, size := range []int{0, 1, 100, len(data), len(data) + 1, 3 * len(data)} {
		got, err := Sized(iotest.OneByteReader(bytes.NewReader(data)), size)
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("Sized(size %d) = %d bytes, %v; want the %d bytes", size, len(got), err, len(data))
		}
	}
	got, err := Sized(bytes.NewReader(data), len(data)+1)
	if err != nil || cap(got) != len(data)+1 {
		t.Errorf("Sized(size len+1) has capacity %d, %v; want %d: no regrowth", cap(got), err, len(data)+1)
	}
	boom := errors.New("boom")
	if _, err := Sized(io.MultiReader(bytes.NewReader(data), iotest.ErrReader(boom)), 10); !errors.Is(err, boom) {
		t.Errorf("Sized(failing reader) = %v, want %v", err, boom)
	}
}
