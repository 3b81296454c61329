package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat; 100 on every Linux
// build that matters here.
const clockTicks = 100

// procStat reads ppid and utime+stime (in ticks) of one process.
func procStat(pid int) (ppid int, ticks int64, err error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name is in parentheses and may hold spaces; fields start after the last ')'.
	s := string(raw)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: short", pid)
	}
	// f[0] is state (field 3); ppid is field 4, utime 14, stime 15.
	ppid, _ = strconv.Atoi(f[1])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return ppid, utime + stime, nil
}

// processTree returns root and all its descendants alive right now.
func processTree(root int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, err := procStat(pid); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	tree := []int{root}
	for i := 0; i < len(tree); i++ {
		tree = append(tree, children[tree[i]]...)
	}
	return tree
}

// CPUTime sums user+system CPU of every process in the trees of roots. It counts only
// processes alive now, which is right here: proxies keep their workers for the whole run.
func CPUTime(roots []int) time.Duration {
	var ticks int64
	for _, root := range roots {
		for _, pid := range processTree(root) {
			if _, t, err := procStat(pid); err == nil {
				ticks += t
			}
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// PeakRSS sums VmHWM (the high-water mark of resident memory) over the trees of roots.
func PeakRSS(roots []int) int64 { return sumOverTrees(roots, vmHWM) }

// CurrentRSS sums VmRSS (resident memory now, not the high-water mark) over the trees of
// roots: the held-streams scenario compares two moments of one process, after earlier peaks.
func CurrentRSS(roots []int) int64 { return sumOverTrees(roots, currentRSS) }

func sumOverTrees(roots []int, of func(pid int) int64) int64 {
	var total int64
	for _, root := range roots {
		for _, pid := range processTree(root) {
			total += of(pid)
		}
	}
	return total
}

func vmHWM(pid int) int64 {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest) // "12345 kB"
			if len(f) == 0 {
				return 0
			}
			kb, _ := strconv.ParseInt(f[0], 10, 64)
			return kb * 1024
		}
	}
	return 0
}
