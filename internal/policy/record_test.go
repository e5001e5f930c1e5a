package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRecordRoundTrip(t *testing.T) {
	r := Record{Text: "-- colder\nRULE 'a' SET POOL 'fast'\n", Version: 7,
		Installed: time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600)), By: "alice", Comment: "é"}
	b, err := Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"v":1,"text":"-- colder\nRULE 'a' SET POOL 'fast'\n","version":7,"installed":"2026-01-02T02:04:05.000000006Z","by":"alice","comment":"é"}`
	if string(b) != want {
		t.Errorf("Encode:\n%s\nwant\n%s", b, want)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Text != r.Text || got.Version != r.Version || !got.Installed.Equal(r.Installed) || got.By != r.By || got.Comment != r.Comment {
		t.Errorf("Decode: %+v, want %+v", got, r)
	}
	// Empty optional fields are left out.
	b, _ = Encode(Record{Text: "", Version: 1, Installed: time.Unix(0, 0)})
	if string(b) != `{"v":1,"text":"","version":1,"installed":"1970-01-01T00:00:00Z"}` {
		t.Errorf("Encode: %s", b)
	}
}

func TestRecordRefused(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want error
		msg  string
	}{
		{`{"v":2,"text":"x","future":true}`, ErrNewerFormat, "the policy record has format version 2, this weft reads up to 1: upgrade weft on this node"},
		{`{"text":"x"}`, ErrCorrupt, `no record version "v"`},
		{`{"v":0}`, ErrCorrupt, `no record version "v"`},
		{`not json`, ErrCorrupt, "invalid character"},
		{`{"v":1,"version":"seven"}`, ErrCorrupt, "cannot unmarshal"},
		{`[1]`, ErrCorrupt, "cannot unmarshal"},
	} {
		_, err := Decode([]byte(tc.in))
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Decode(%s): %v, want %v with %q", tc.in, err, tc.want, tc.msg)
		}
	}
	// A version-1 record with a field this binary does not know reads.
	if _, err := Decode([]byte(`{"v":1,"text":"x","version":1,"installed":"2026-01-01T00:00:00Z","later":1}`)); err != nil {
		t.Error(err)
	}
	for _, r := range []Record{{Text: "RULE 'caf\xe9' DELETE"}, {By: "\xff"}, {Comment: "\xfe"},
		{Text: strings.Repeat(" ", MaxSourceBytes+1)}, {Installed: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}} {
		if _, err := Encode(r); !errors.Is(err, ErrInvalid) {
			t.Errorf("Encode(%.40q...): %v, want ErrInvalid", r.Text+r.By+r.Comment, err)
		}
	}
}
