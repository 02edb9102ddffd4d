// Package readall reads a whole stream of known size in one buffer.
//
// The buffer is allocated once, from the size given in advance, and
// never regrown.
package readall

import "io"

// Sized is io.ReadAll into a buffer of capacity size first, so that
// content of the expected size is read in one allocation (io.ReadAll
// would regrow its buffer, leaving about twice the content behind as
// garbage: some 100 MiB for a 30 MiB file). Give size one more than the
// expected length, so that the read that finds EOF needs no room.
func Sized(r io.Reader, size int) ([]byte, error) {
	b := make([]byte, 0, max(size, 1))
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
