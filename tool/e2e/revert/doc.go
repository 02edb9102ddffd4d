// Package revert holds mcbake's end-to-end tests of revert predictions against real ostree.
package revert
