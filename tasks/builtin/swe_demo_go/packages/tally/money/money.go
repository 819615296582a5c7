// Package money parses and formats amounts of money held as whole cents.
package money

import (
	"fmt"
	"strconv"
	"strings"
)

// Cents is an amount of money in hundredths of the currency unit.
type Cents int64

// Parse reads "12", "12.5", "12.50", "-0.07" or "1,234.56" (commas group thousands).
func Parse(s string) (Cents, error) {
	text := strings.ReplaceAll(strings.TrimSpace(s), ",", "")
	negative := strings.HasPrefix(text, "-")
	text = strings.TrimPrefix(text, "-")
	whole, frac, _ := strings.Cut(text, ".")
	if whole == "" || len(frac) > 2 {
		return 0, fmt.Errorf("money: cannot parse %q", s)
	}
	units, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("money: cannot parse %q", s)
	}
	var cents int64
	if frac != "" {
		if cents, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return 0, fmt.Errorf("money: cannot parse %q", s)
		}
		if len(frac) == 1 {
			cents *= 10
		}
	}
	total := Cents(units*100 + cents)
	if negative {
		total = -total
	}
	return total, nil
}

// String formats c with two decimals and a leading minus sign when negative.
func (c Cents) String() string {
	sign := ""
	if c < 0 {
		sign, c = "-", -c
	}
	return fmt.Sprintf("%s%d.%02d", sign, c/100, c%100)
}

// Split divides c into n parts that differ by at most one cent, the larger parts first.
func Split(c Cents, n int) []Cents {
	parts := make([]Cents, n)
	base, rest := c/Cents(n), c%Cents(n)
	for i := range parts {
		parts[i] = base
		if Cents(i) < rest {
			parts[i]++
		}
	}
	return parts
}
