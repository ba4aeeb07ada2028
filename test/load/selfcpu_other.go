//go:build !unix

package main

// selfCPU is not measured here: the CPU table leaves the generator's column out.
func selfCPU() (float64, bool) { return 0, false }
