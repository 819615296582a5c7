package wrap

import (
	"reflect"
	"testing"
)

func TestLines(t *testing.T) {
	got := Lines("the quick brown fox jumps", 10)
	want := []string{"the quick", "brown fox", "jumps"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Lines = %q, want %q", got, want)
	}
}

func TestLongWord(t *testing.T) {
	got := Lines("a supercalifragilistic word", 8)
	want := []string{"a", "supercalifragilistic", "word"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Lines = %q, want %q", got, want)
	}
}

func TestIndent(t *testing.T) {
	got := Indent("one two three", 10, "> ")
	want := []string{"> one two", "> three"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Indent = %q, want %q", got, want)
	}
}
