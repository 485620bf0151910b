package pessimistic

// Job is a row claimed by ClaimJobs or ClaimJobsMySQL.
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
// ClaimJobs never modifies the struct.
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

// claimSQL holds the quoted identifiers of a claim statement.
type claimSQL struct {
	table, id, payload, state, by, at string
	pending, claimed, worker          string
}

func (o *ClaimOptions) build(table string, n int, quote func(...string) (string, error)) (claimSQL, error) {
	var v ClaimOptions
	if o != nil {
		v = *o
	}
	def := func(s *string, d string) {
		if *s == "" {
			*s = d
		}
	}
	def(&v.IDColumn, "id")
	def(&v.PayloadColumn, "payload")
	def(&v.StateColumn, "state")
	def(&v.ClaimedByColumn, "claimed_by")
	def(&v.ClaimedAtColumn, "claimed_at")
	def(&v.Pending, "pending")
	def(&v.Claimed, "claimed")
	if n <= 0 {
		return claimSQL{}, invalid("claim n = %d, want > 0", n)
	}
	if v.Pending == v.Claimed {
		return claimSQL{}, invalid("pending and claimed states are both %q", v.Pending)
	}
	c := claimSQL{pending: v.Pending, claimed: v.Claimed, worker: v.Worker}
	for _, f := range []struct {
		dst  *string
		name string
		what string
	}{
		{&c.table, table, "table"},
		{&c.id, v.IDColumn, "id column"},
		{&c.payload, v.PayloadColumn, "payload column"},
		{&c.state, v.StateColumn, "state column"},
		{&c.by, v.ClaimedByColumn, "claimed-by column"},
		{&c.at, v.ClaimedAtColumn, "claimed-at column"},
	} {
		q, err := quote(f.name)
		if err != nil {
			return claimSQL{}, invalid("%s: %w", f.what, err)
		}
		*f.dst = q
	}
	return c, nil
}
