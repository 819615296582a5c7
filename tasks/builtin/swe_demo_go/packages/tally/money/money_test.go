package money

import (
	"reflect"
	"testing"
)

func TestParse(t *testing.T) {
	for in, want := range map[string]Cents{"12": 1200, "12.50": 1250, "-0.07": -7} {
		got, err := Parse(in)
		if err != nil || got != want {
			t.Errorf("Parse(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestParseInvalid(t *testing.T) {
	for _, in := range []string{"", "abc", "1.234", "."} {
		if _, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) gave no error", in)
		}
	}
}

func TestString(t *testing.T) {
	if got := Cents(-1205).String(); got != "-12.05" {
		t.Fatalf("String = %q", got)
	}
}

func TestSplit(t *testing.T) {
	if got := Split(1000, 3); !reflect.DeepEqual(got, []Cents{334, 333, 333}) {
		t.Fatalf("Split = %v", got)
	}
}
