package node

import "time"

// WithFailAt returns o with a failure injected before the commit of write
// i (when f returns an error for it).
func WithFailAt(o PrepareOptions, f func(i int) error) PrepareOptions {
	o.failAt = f
	return o
}

// SetRunningEtc makes p the running system's /etc until the returned
// function is called.
func SetRunningEtc(p string) func() {
	old := runningEtc
	runningEtc = p
	return func() { runningEtc = old }
}

// SetLockWait makes runs wait d for another's lock until the returned
// function is called.
func SetLockWait(d time.Duration) func() {
	old := lockWait
	lockWait = d
	return func() { lockWait = old }
}
