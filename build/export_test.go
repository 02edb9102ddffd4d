package build

// FromReference is fromReference, for the tests.
var FromReference = fromReference
