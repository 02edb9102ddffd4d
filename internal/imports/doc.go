// Package imports holds the tests that keep the package map true.
//
// The map is docs/design.md, "Packages": the tests check that it lists
// every package, and that its import rules hold.
package imports
