package chaos

import "testing"

// bothWays runs run as the parallel subtests "safe" and "unsafe" (the
// negative control: the same seed with the safety mechanism off).
func bothWays(t *testing.T, run func(t *testing.T, unsafe bool)) {
	for _, unsafe := range []bool{false, true} {
		name := "safe"
		if unsafe {
			name = "unsafe"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t, unsafe)
		})
	}
}

// checkVerdict fails t unless a safe run found no anomaly and an unsafe
// one found anomalies of kind want — and, with only, no other kind. what
// names the safety mechanism the unsafe run turns off.
func checkVerdict(t *testing.T, s *Summary, unsafe bool, what, want string, only bool) {
	t.Helper()
	switch {
	case !unsafe && !s.Report.Valid:
		t.Errorf("anomalies with %s: %+v", what, s.Report.Anomalies)
	case unsafe && s.Report.Counts[want] == 0:
		t.Errorf("no %s without %s: the faults were too weak\n%s", want, what, s)
	}
	if unsafe && only {
		for k := range s.Report.Counts {
			if k != want {
				t.Errorf("unsafe run: unexpected anomaly kind %q: %+v", k, s.Report.Anomalies)
			}
		}
	}
}
