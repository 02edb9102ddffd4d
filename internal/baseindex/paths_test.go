package baseindex

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestPathTable inserts and removes paths at random, enough to grow the
// table and to wrap probes around its end, and checks that every path
// is found in its slot, and no removed one.
func TestPathTable(t *testing.T) {
	tests := []struct {
		name  string
		paths int
		ops   int
	}{
		{name: "small", paths: 50, ops: 2000},
		{name: "grows", paths: 5000, ops: 40000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			m := newMerger()
			ix := m.ix
			want := map[string]int32{"": 0}
			for range tt.ops {
				p := fmt.Sprintf("d%d/f%d", rng.IntN(20), rng.IntN(tt.paths))
				i, at := ix.lookup(p)
				if slot, ok := want[p]; ok != (i != noSlot) || ok && slot != i {
					t.Fatalf("lookup(%q) = %d, want %d (present %v)", p, i, slot, ok)
				}
				if i == noSlot {
					i = m.alloc()
					ix.node(i).Path = p
					ix.insert(p, i, at)
					want[p] = i
					continue
				}
				if rng.IntN(2) == 0 {
					ix.unset(p)
					delete(want, p)
				}
			}
			if ix.paths.count != len(want) {
				t.Errorf("count = %d, want %d", ix.paths.count, len(want))
			}
			for p, slot := range want {
				if i, ok := ix.get(p); !ok || i != slot {
					t.Errorf("get(%q) = %d, %v, want %d", p, i, ok, slot)
				}
			}
		})
	}
}
