// Package containerimage tests mcbake's own container image.
//
// The test builds the image from the root Containerfile (make image,
// hack/image.sh) offline, with local substitutes for its base images, then
// runs the steps of the repository's Tekton Task (examples/tekton) inside
// it as a random non-root UID, one container per step as Tekton does,
// against a real registry. There is no code here besides the test.
package containerimage
