package local

import "testing"

func TestCheckEnv(t *testing.T) {
	for _, tc := range []struct {
		env []string
		ok  bool
	}{
		{nil, true},
		{[]string{"WEFT_FAILPOINTS=drive/put-before-sync=crash"}, true},
		{[]string{"A=", "B=1"}, true},
		{[]string{"WEFT_FAILPOINTS"}, false},
		{[]string{"=x"}, false},
		{[]string{"A B=1"}, false},
	} {
		if err := checkEnv(tc.env); (err == nil) != tc.ok {
			t.Errorf("checkEnv(%q) = %v, want ok=%v", tc.env, err, tc.ok)
		}
	}
}
