package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// raiseFileLimit lifts this process's RLIMIT_NOFILE so the children started after it inherit
// at least want descriptors (nginx does not raise its own soft limit; Go programs raise theirs
// only to the hard limit). It returns the soft limit now in force.
//
// Go raises its own soft limit at start-up but restores the original one in every child it
// execs, unless the program sets the limit itself: that is why this calls Setrlimit even when
// the soft limit is already high enough here.
func raiseFileLimit(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	if lim.Max < want {
		// Root (CAP_SYS_RESOURCE) may raise the hard limit too, up to fs.nr_open.
		up := syscall.Rlimit{Cur: want, Max: want}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up) == nil {
			return want, nil
		}
	}
	lim.Cur = lim.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", lim.Max, err)
	}
	return lim.Cur, nil
}

// ephemeralPorts is the size of net.ipv4.ip_local_port_range: how many connections one
// source address can have open to one destination (address and port) at a time.
func ephemeralPorts() (int, error) {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, fmt.Errorf("read ip_local_port_range: %w", err)
	}
	var lo, hi int
	if _, err := fmt.Sscan(strings.TrimSpace(string(raw)), &lo, &hi); err != nil || hi < lo {
		return 0, fmt.Errorf("ip_local_port_range %q: not two ports", strings.TrimSpace(string(raw)))
	}
	return hi - lo + 1, nil
}
