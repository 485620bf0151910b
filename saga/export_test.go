package saga

import "time"

// SetHeartbeat sets d's lease-extension interval (LeaseTTL/3 otherwise),
// so that tests with a manual clock see extensions in real time.
func SetHeartbeat[In any](d *Definition[In], every time.Duration) { d.heartbeat = every }
