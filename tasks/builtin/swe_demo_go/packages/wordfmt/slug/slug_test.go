package slug

import "testing"

func TestMakeSimple(t *testing.T) {
	if got := Make("Hello World", '-'); got != "hello-world" {
		t.Fatalf("Make = %q, want %q", got, "hello-world")
	}
}

func TestMakeCases(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"digits", "Go 1.22 released", "go-1-22-released"},
		{"accents", "Crème brûlée", "creme-brulee"},
		{"empty", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Make(c.in, '-'); got != c.want {
				t.Errorf("Make(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}
