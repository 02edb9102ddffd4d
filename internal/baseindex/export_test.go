package baseindex

import "math/bits"

// CheckedBlocks returns how many of the blocks of the view ix reads have
// been checked so far, and how many it has; 0, 0 for an index built in
// memory.
func CheckedBlocks(ix *Index) (checked, blocks int) {
	if ix.view == nil {
		return 0, 0
	}
	for i := range ix.view.checked {
		checked += bits.OnesCount64(ix.view.checked[i].Load())
	}
	return checked, len(ix.view.sums) / 4
}
