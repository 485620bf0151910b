package deadlock

import "fmt"

// Policy is how the simulator keeps two-phase locking live.
type Policy uint8

// Policies. The zero value is Detect.
const (
	// Detect searches the wait-for graph from every new wait and aborts a
	// victim (chosen by Options.Victim) from each cycle found.
	Detect Policy = iota
	// DetectPeriodic lets transactions wait and searches the whole graph
	// every Options.DetectInterval.
	DetectPeriodic
	// WaitDie (non-preemptive): an older requester waits for younger
	// holders, a younger one aborts ("dies"). Never deadlocks.
	WaitDie
	// WoundWait (preemptive): an older requester aborts ("wounds") younger
	// holders, a younger one waits for older ones. Never deadlocks.
	WoundWait
	// NoWait aborts the requester whenever its lock is not available at
	// once. Never waits, so never deadlocks.
	NoWait
	// Timeout lets transactions wait and aborts a wait that lasts
	// Options.LockTimeout (what a lock_timeout / innodb_lock_wait_timeout
	// alone gives you).
	Timeout
)

// AllPolicies returns every policy, in declaration order.
func AllPolicies() []Policy {
	return []Policy{Detect, DetectPeriodic, WaitDie, WoundWait, NoWait, Timeout}
}

var policyNames = [...]string{"detect", "detect-periodic", "wait-die", "wound-wait", "no-wait", "timeout"}

// String returns the policy's name as accepted by ParsePolicy.
func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// ParsePolicy parses a policy name ("detect", "detect-periodic",
// "wait-die", "wound-wait", "no-wait", "timeout"). It returns an error
// wrapping ErrInvalidWorkload for any other name.
func ParsePolicy(s string) (Policy, error) {
	for i, n := range policyNames {
		if n == s {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown policy %q", ErrInvalidWorkload, s)
}

// Victim is how deadlock detection picks the transaction to abort in a cycle.
type Victim uint8

// Victim selection rules; ties go to the youngest. The zero value is Youngest.
const (
	Youngest    Victim = iota // the most recent timestamp (least likely to starve others)
	LeastWork                 // the fewest steps completed in its current attempt
	FewestLocks               // the fewest locks held
)

var victimNames = [...]string{"youngest", "least-work", "fewest-locks"}

// String returns the rule's name as accepted by ParseVictim.
func (v Victim) String() string {
	if int(v) < len(victimNames) {
		return victimNames[v]
	}
	return fmt.Sprintf("Victim(%d)", uint8(v))
}

// ParseVictim parses "youngest", "least-work" or "fewest-locks". It returns
// an error wrapping ErrInvalidWorkload for any other name.
func ParseVictim(s string) (Victim, error) {
	for i, n := range victimNames {
		if n == s {
			return Victim(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown victim rule %q", ErrInvalidWorkload, s)
}

// Cause is why a transaction was aborted.
type Cause uint8

// Abort causes.
const (
	CauseDeadlock Cause = iota + 1 // chosen as a deadlock victim
	CauseDied                      // wait-die: younger than a lock holder
	CauseWounded                   // wound-wait: an older transaction wanted its lock
	CauseNoWait                    // no-wait: its lock was not free
	CauseTimeout                   // its lock wait timed out
)

var causeNames = [...]string{"", "deadlock", "died", "wounded", "no-wait", "timeout"}

// String returns the cause's name.
func (c Cause) String() string {
	if c > 0 && int(c) < len(causeNames) {
		return causeNames[c]
	}
	return fmt.Sprintf("Cause(%d)", uint8(c))
}

// Aborts counts aborted attempts by cause.
type Aborts struct {
	Deadlock, Died, Wounded, NoWait, Timeout int
}

// Total returns the number of aborted attempts.
func (a Aborts) Total() int { return a.Deadlock + a.Died + a.Wounded + a.NoWait + a.Timeout }

func (a *Aborts) add(c Cause) {
	switch c {
	case CauseDeadlock:
		a.Deadlock++
	case CauseDied:
		a.Died++
	case CauseWounded:
		a.Wounded++
	case CauseNoWait:
		a.NoWait++
	case CauseTimeout:
		a.Timeout++
	}
}
