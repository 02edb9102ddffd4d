// Package revert holds mcbake's end-to-end tests of revert predictions:
// images built by mcbake, reverted with real ostree, compared with what
// mcbake predicted.
package revert
