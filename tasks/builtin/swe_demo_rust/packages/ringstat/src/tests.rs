use super::*;

#[test]
fn keeps_samples_in_order() {
    let mut ring = Ring::new(3);
    ring.push(1.0);
    ring.push(2.0);
    assert_eq!(ring.to_vec(), vec![1.0, 2.0]);
    assert_eq!(ring.len(), 2);
}

#[test]
fn max_of_samples() {
    let mut ring = Ring::new(4);
    for sample in [3.0, 9.0, 4.0] {
        ring.push(sample);
    }
    assert_eq!(ring.max(), Some(9.0));
}

#[test]
fn mean_of_samples() {
    let mut ring = Ring::new(4);
    for sample in [1.0, 2.0, 6.0] {
        ring.push(sample);
    }
    assert_eq!(ring.mean(), Some(3.0));
}

#[test]
#[should_panic(expected = "at least one sample")]
fn zero_capacity_is_refused() {
    Ring::new(0);
}
