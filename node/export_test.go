package node

// WithFailAt returns o with a failure injected before the commit of write
// i (when f returns an error for it).
func WithFailAt(o PrepareOptions, f func(i int) error) PrepareOptions {
	o.failAt = f
	return o
}

// SetCmdline makes p the kernel command line's file until the returned
// function is called.
func SetCmdline(p string) func() {
	old := procCmdline
	procCmdline = p
	return func() { procCmdline = old }
}
