// Package wrap breaks text into lines of at most a given width.
package wrap

import "strings"

// Lines splits text into words and fills lines of at most width runes, one space between words.
// A word longer than width gets a line of its own.
func Lines(text string, width int) []string {
	var lines []string
	var line []string
	length := 0
	for _, word := range strings.Fields(text) {
		n := len([]rune(word))
		if len(line) > 0 && length+1+n > width {
			lines = append(lines, strings.Join(line, " "))
			line, length = nil, 0
		}
		if len(line) > 0 {
			length++
		}
		line = append(line, word)
		length += n
	}
	if len(line) > 0 {
		lines = append(lines, strings.Join(line, " "))
	}
	return lines
}

// Indent fills lines of at most width runes, each starting with prefix.
func Indent(text string, width int, prefix string) []string {
	lines := Lines(text, width-len([]rune(prefix)))
	for i, line := range lines {
		lines[i] = prefix + line
	}
	return lines
}
