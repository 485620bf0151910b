// Package problem writes HTTP error responses as RFC 9457 problem details
// (application/problem+json), for the HTTP middlewares of the module
// (idempotency, ratelimit). It imports only the standard library.
package problem

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// ContentType is the media type of a problem details document.
const ContentType = "application/problem+json"

// Details is an RFC 9457 problem details object. Type is a URI reference
// that identifies the problem type ("about:blank" when empty); Title is a
// short, stable summary of that type; Detail explains this occurrence.
// Extra members are added at the top level (RFC 9457 §3.2).
type Details struct {
	Type     string
	Title    string
	Status   int
	Detail   string
	Instance string
	Extra    map[string]any
}

// Write sends d with status d.Status (500 when zero), the problem+json
// content type and Cache-Control: no-store. Headers already set on w (a
// Retry-After, say) are kept.
func Write(w http.ResponseWriter, d Details) {
	if d.Status == 0 {
		d.Status = http.StatusInternalServerError
	}
	if d.Type == "" {
		d.Type = "about:blank"
	}
	if d.Title == "" {
		d.Title = http.StatusText(d.Status)
	}
	body := make(map[string]any, len(d.Extra)+5)
	for k, v := range d.Extra {
		body[k] = v
	}
	body["type"], body["title"], body["status"] = d.Type, d.Title, d.Status
	if d.Detail != "" {
		body["detail"] = d.Detail
	}
	if d.Instance != "" {
		body["instance"] = d.Instance
	}
	b, err := json.Marshal(body)
	if err != nil { // an Extra value that cannot be encoded: drop the extras
		b, _ = json.Marshal(map[string]any{"type": d.Type, "title": d.Title, "status": d.Status, "detail": d.Detail})
	}
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(d.Status)
	_, _ = w.Write(b)
}
