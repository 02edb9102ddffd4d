package image

// ShutdownTestStore is shutdownTestStore for the external tests.
var ShutdownTestStore = shutdownTestStore
