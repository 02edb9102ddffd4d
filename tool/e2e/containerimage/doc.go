// Package containerimage tests mcbake's own container image.
//
// The test (make image, hack/image.sh) builds the image offline, then runs
// the steps of the repository's Tekton Task (examples/tekton) inside it, one
// container per step as Tekton does, against a real registry. There is no
// code here besides the test.
package containerimage
