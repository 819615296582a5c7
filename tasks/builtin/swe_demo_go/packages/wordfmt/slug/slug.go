// Package slug turns titles into URL path segments.
package slug

import (
	"strings"
	"unicode"
)

// Make lower-cases s, keeps letters and digits, and joins the runs between them with sep
// (one sep per run, none at either end). Letters with accents keep their base letter.
func Make(s string, sep rune) string {
	var b strings.Builder
	pending := false
	for _, r := range s {
		r = fold(r)
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if pending && b.Len() > 0 {
				b.WriteRune(sep)
			}
			pending = false
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		pending = true
	}
	return b.String()
}

// fold maps the Latin-1 letters with accents to their base letter.
func fold(r rune) rune {
	const from = "àáâãäåèéêëìíîïòóôõöùúûüýñç"
	const to = "aaaaaaeeeeiiiiooooouuuuync"
	lower := unicode.ToLower(r)
	if i := strings.IndexRune(from, lower); i >= 0 {
		folded := []rune(to)[len([]rune(from[:i]))]
		if unicode.IsUpper(r) {
			return unicode.ToUpper(folded)
		}
		return folded
	}
	return r
}
