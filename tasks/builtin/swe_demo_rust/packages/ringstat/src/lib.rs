//! A fixed-capacity ring buffer of `f64` samples with running statistics.

/// The newest `capacity` samples pushed; older ones are dropped.
#[derive(Debug, Clone)]
pub struct Ring {
    samples: Vec<f64>,
    capacity: usize,
    next: usize, // where the next sample goes once the ring is full: the oldest one
}

impl Ring {
    /// An empty ring holding at most `capacity` samples.
    ///
    /// # Panics
    /// When `capacity` is 0.
    pub fn new(capacity: usize) -> Ring {
        assert!(capacity > 0, "a ring needs room for at least one sample");
        Ring { samples: Vec::with_capacity(capacity), capacity, next: 0 }
    }

    /// Adds `sample`; when the ring is full it replaces the oldest sample.
    pub fn push(&mut self, sample: f64) {
        if self.samples.len() < self.capacity {
            self.samples.push(sample);
        } else {
            self.samples[self.next] = sample;
            self.next = (self.next + 1) % self.capacity;
        }
    }

    pub fn len(&self) -> usize {
        self.samples.len()
    }

    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The samples from oldest to newest.
    pub fn to_vec(&self) -> Vec<f64> {
        let (newer, older) = self.samples.split_at(self.next);
        older.iter().chain(newer).copied().collect()
    }

    /// The mean of the samples, or `None` when there are none.
    pub fn mean(&self) -> Option<f64> {
        if self.samples.is_empty() {
            return None;
        }
        Some(self.samples.iter().sum::<f64>() / self.samples.len() as f64)
    }

    /// The largest sample, or `None` when there are none.
    pub fn max(&self) -> Option<f64> {
        self.samples.iter().copied().reduce(f64::max)
    }
}

#[cfg(test)]
mod tests;
