package main

// rdtsc reads the CPU's time-stamp counter (clock_amd64.s).
func rdtsc() uint64

// haveTSC: the counter can be read here (see tscUsable for whether it is
// a clock).
const haveTSC = true
