package lease

// PauseTimer stops l's expiry timer, as a process paused (SIGSTOP, a long
// GC) past the deadline would find it: the time is over but the timer has
// not run. Only tests can call it.
func PauseTimer(l *Lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paused = true
	if l.timer != nil {
		l.timer.Stop()
	}
}

// TimerArmed reports whether l's expiry timer exists.
func TimerArmed(l *Lease) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.timer != nil
}
