package pessimistic

// Job is a row claimed by the adapters' ClaimJobs.
type Job struct {
	ID      int64
	Payload []byte
}

// ClaimOptions names the columns and states of a job table. A nil
// *ClaimOptions and every empty field mean the defaults, which match the
// example table
//
//	jobs(id bigint PRIMARY KEY, payload text, state text DEFAULT 'pending',
//	     claimed_by text, claimed_at timestamp)
//
// ClaimJobs never modifies the struct. Pending and Claimed must differ
// (else ClaimJobs returns an error matching concurkit.ErrInvalidArgument);
// column names are validated and quoted by the adapter.
type ClaimOptions struct {
	IDColumn        string // default "id" (an integer key)
	PayloadColumn   string // default "payload"
	StateColumn     string // default "state"
	ClaimedByColumn string // default "claimed_by"
	ClaimedAtColumn string // default "claimed_at"; set to the server's current time
	Pending         string // state of claimable jobs; default "pending"
	Claimed         string // state written on claim; default "claimed"
	Worker          string // written to ClaimedByColumn; default "" (empty string)
}
