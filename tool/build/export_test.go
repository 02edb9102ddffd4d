package build

// FromReference is fromReference, for the tests.
var FromReference = fromReference

// FakeCompressModule makes the built-layer cache work in a test binary,
// which records no modules, as if the compression module were m.
func FakeCompressModule(m string) (restore func()) {
	saved := compressModule
	compressModule = func() string { return m }
	return func() { compressModule = saved }
}

// NoGuardAhead makes builds write the guard's layer when they have read
// the base, not ahead.
func NoGuardAhead() (restore func()) {
	noGuardAhead = true
	return func() { noGuardAhead = false }
}
