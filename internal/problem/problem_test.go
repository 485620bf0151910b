package problem_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/concurkit/concurkit/internal/problem"
)

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	rec.Header().Set("Retry-After", "3")
	problem.Write(rec, problem.Details{
		Type: "https://example.com/probs/conflict", Status: http.StatusConflict,
		Detail: "a request with this key is in progress", Extra: map[string]any{"key": "k1", "status": "ignored"},
	})
	if rec.Code != http.StatusConflict {
		t.Fatalf("status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != problem.ContentType {
		t.Fatalf("content type %q", ct)
	}
	if rec.Header().Get("Retry-After") != "3" || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("headers %v", rec.Header())
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "https://example.com/probs/conflict", "title": "Conflict", "status": float64(409),
		"detail": "a request with this key is in progress", "key": "k1"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("members %v, want %v (an extra member must not override a standard one)", got, want)
	}
}

func TestWriteDefaults(t *testing.T) {
	rec := httptest.NewRecorder()
	problem.Write(rec, problem.Details{})
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 500 || got["type"] != "about:blank" || got["title"] != "Internal Server Error" {
		t.Fatalf("%d %v", rec.Code, got)
	}
}
