package stats

import "testing"

func TestMean(t *testing.T) {
	if got, _ := Mean([]float64{1, 2, 3, 6}); got != 3 {
		t.Fatalf("Mean = %v", got)
	}
	if _, err := Mean(nil); err != ErrEmpty {
		t.Fatalf("Mean(nil) error = %v", err)
	}
}

func TestMedianOdd(t *testing.T) {
	if got, _ := Median([]float64{5, 1, 3}); got != 3 {
		t.Fatalf("Median = %v", got)
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{10, 20, 30, 40, 50}
	for _, c := range []struct {
		name string
		p    float64
		want float64
	}{{"min", 0, 10}, {"median", 50, 30}, {"max", 100, 50}} {
		t.Run(c.name, func(t *testing.T) {
			if got, err := Percentile(xs, c.p); err != nil || got != c.want {
				t.Errorf("Percentile(%v) = %v, %v; want %v", c.p, got, err, c.want)
			}
		})
	}
}
