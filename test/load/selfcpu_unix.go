//go:build unix

package main

import "syscall"

// selfCPU is this process's CPU time so far (user and system), in seconds:
// the generator's own share of the machine, the receiver's included.
func selfCPU() (float64, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	sec := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return sec(ru.Utime) + sec(ru.Stime), true
}
