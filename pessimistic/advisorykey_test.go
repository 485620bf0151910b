package pessimistic

import "testing"

func TestAdvisoryKey(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		// Reference values of FNV-1a 64 (uint64 shown in the comment).
		{"", -3750763034362895579},       // 0xcbf29ce484222325
		{"a", -5808556873153909620},      // 0xaf63dc4c8601ec8c
		{"foobar", -8821353812377114648}, // 0x85944171f73967e8
	}
	for _, tt := range tests {
		if got := AdvisoryKey(tt.in); got != tt.want {
			t.Errorf("AdvisoryKey(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
	if AdvisoryKey("orders/42") == AdvisoryKey("orders/43") {
		t.Error("neighbouring names collide")
	}
}
