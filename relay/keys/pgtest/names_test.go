package pgtest

import (
	"slices"
	"testing"
)

func TestDatabaseName(t *testing.T) {
	for _, tc := range []struct {
		seq  int64
		test string
		want string
	}{
		{1, "TestStore/InsertFind", "t1_teststore_insertfind"},
		{12, "Test Ω-x", "t12_test___x"},
	} {
		if got := databaseName(tc.seq, tc.test); got != tc.want {
			t.Errorf("databaseName(%d, %q) = %q, want %q", tc.seq, tc.test, got, tc.want)
		}
	}
	long := databaseName(123, string(make([]byte, 200)))
	if len(long) > 63 {
		t.Errorf("databaseName of a long test name: %d bytes, over PostgreSQL's 63", len(long))
	}
}

// TestNewestVersionFirst: /usr/lib/postgresql/17 wins over 9.6 and 15.
func TestNewestVersionFirst(t *testing.T) {
	dirs := []string{"/usr/lib/postgresql/9.6/bin", "/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/15/bin"}
	slices.SortFunc(dirs, func(a, b string) int { return compareVersions(versionOf(b), versionOf(a)) })
	if dirs[0] != "/usr/lib/postgresql/17/bin" || dirs[2] != "/usr/lib/postgresql/9.6/bin" {
		t.Errorf("order: %v", dirs)
	}
}
