package baseindex

import "hash/maphash"

// pathTable maps the paths of an index to their slots. It is a hash table
// with open addressing and linear probing, whose cells hold a path's
// 32-bit hash (high half) and its slot + 1 (low half), 0 being empty:
// probing reads a path only when its hash matches, growing reads none,
// and a path costs 11 to 21 bytes, about half what a map costs.
type pathTable struct {
	cells []uint64
	count int
	// gen counts the changes, which move cells.
	gen  uint64
	seed maphash.Seed
}

const (
	minCells = 1 << 10
	noCell   = -1
)

func newPathTable() pathTable {
	return pathTable{cells: newCells(minCells), seed: maphash.MakeSeed()}
}

// newCells returns size empty cells. It writes to each page of them, so
// that the kernel maps them at once: probing reads cells before writing
// them, and a first read would map a shared page of zeros, which the
// first write then has to replace.
func newCells(size int) []uint64 {
	cells := make([]uint64, size)
	for i := 0; i < size; i += 512 {
		cells[i] = 0
	}
	return cells
}

func (t *pathTable) hash(p string) uint32 {
	return uint32(maphash.String(t.seed, p))
}

// get returns the slot of p.
func (ix *Index) get(p string) (int32, bool) {
	c, _ := ix.probe(p, ix.paths.hash(p))
	if c < 0 {
		return 0, false
	}
	return int32(ix.paths.cells[c]) - 1, true
}

// probe returns the cell that holds p, or -1 and the empty cell where p
// would go.
func (ix *Index) probe(p string, h uint32) (found, empty int) {
	t := &ix.paths
	mask := len(t.cells) - 1
	for c := int(h) & mask; ; c = (c + 1) & mask {
		cell := t.cells[c]
		switch {
		case cell == 0:
			return noCell, c
		case uint32(cell>>32) == h && ix.node(int32(cell)-1).Path == p:
			return c, noCell
		}
	}
}

// cell is where lookup found that a missing path would go, which holds
// until the table changes.
type cell struct {
	hash uint32
	at   int
	gen  uint64
}

// lookup returns the slot of p, or noSlot and where insert puts p.
func (ix *Index) lookup(p string) (int32, cell) {
	h := ix.paths.hash(p)
	found, empty := ix.probe(p, h)
	if found != noCell {
		return int32(ix.paths.cells[found]) - 1, cell{}
	}
	return noSlot, cell{hash: h, at: empty, gen: ix.paths.gen}
}

// insert records that p, which lookup did not find, is in slot i.
func (ix *Index) insert(p string, i int32, c cell) {
	t := &ix.paths
	if c.gen != t.gen || (t.count+1)*4 > len(t.cells)*3 {
		t.reserve(1)
		_, c.at = ix.probe(p, c.hash)
	}
	t.cells[c.at] = uint64(c.hash)<<32 | uint64(i+1)
	t.count++
	t.gen++
}

// reserve grows the table, if needed, to take n more paths.
func (t *pathTable) reserve(n int) {
	size := len(t.cells)
	for (t.count+n)*4 > size*3 {
		size *= 2
	}
	if size != len(t.cells) {
		t.grow(size)
	}
}

// grow rehashes the table into size cells.
func (t *pathTable) grow(size int) {
	old := t.cells
	t.gen++
	t.cells = newCells(size)
	mask := len(t.cells) - 1
	for _, cell := range old {
		if cell == 0 {
			continue
		}
		c := int(cell>>32) & mask
		for t.cells[c] != 0 {
			c = (c + 1) & mask
		}
		t.cells[c] = cell
	}
}

// unset removes p from the table, if it is there.
func (ix *Index) unset(p string) {
	c, _ := ix.probe(p, ix.paths.hash(p))
	if c < 0 {
		return
	}
	ix.paths.removeAt(c)
	ix.paths.count--
	ix.paths.gen++
}

// removeAt empties cell c and moves back the cells after it that probing
// would no longer reach.
func (t *pathTable) removeAt(c int) {
	mask := len(t.cells) - 1
	for {
		t.cells[c] = 0
		next := c
		for {
			next = (next + 1) & mask
			cell := t.cells[next]
			if cell == 0 {
				return
			}
			if !between(int(cell>>32)&mask, c, next) {
				break
			}
		}
		t.cells[c] = t.cells[next]
		c = next
	}
}

// between reports whether home lies cyclically in (from, to]: a cell at
// to whose probing starts there does not pass from.
func between(home, from, to int) bool {
	if from <= to {
		return from < home && home <= to
	}
	return from < home || home <= to
}
