//! fastai's `valley` suggestion: the longest strictly falling run of losses (not necessarily
//! contiguous: a longest decreasing subsequence, ending where it first becomes the longest),
//! and the point two thirds of the way along it (one third, plus half of a third).

/// The index fastai's `valley` picks among `losses` (`None` for no losses): for each point,
/// the length of the longest strictly decreasing run of earlier points ending there; the run
/// kept is the first to reach the greatest length, its start taken (one before its first point)
/// from its length when it first became the longest; the pick is `start + int(span / 3) +
/// int(span / 6)`, in floating point as fastai's, and a pick of -1 means the last point, as a
/// Python index does.
///
/// ```
/// use trainbook::train::valley;
/// // Falls from 5 to 1 over indices 0..=4 (start -1, span 5), then climbs: -1 + 1 + 0.
/// assert_eq!(valley(&[5.0, 4.0, 3.0, 2.0, 1.0, 3.0, 9.0]), Some(0));
/// // A run of two from the first point: -1 + 0 + 0, the last point.
/// assert_eq!(valley(&[1.0, 0.5, 0.7]), Some(2));
/// assert_eq!(valley(&[]), None);
/// ```
pub fn valley(losses: &[f64]) -> Option<usize> {
    if losses.is_empty() {
        return None;
    }
    let n = losses.len();
    let mut run = vec![1usize; n];
    // The start is one before the run's first point (so -1 for a run from index 0), as fastai's.
    let (mut start, mut end) = (0isize, 0usize);
    for i in 1..n {
        for j in 0..i {
            if losses[i] < losses[j] && run[i] < run[j] + 1 {
                run[i] = run[j] + 1;
            }
            // As fastai checks it: inside the inner loop, so the start is taken from the run's
            // length at the moment it first overtook the longest.
            if run[end] < run[i] {
                end = i;
                start = end as isize - run[end] as isize;
            }
        }
    }
    let sections = (end as isize - start) as f64 / 3.0;
    let pick = start + sections as isize + (sections / 2.0) as isize;
    // A pick of -1 (a short run from the first point) is Python's index of the last point.
    Some(if pick < 0 { (n as isize + pick) as usize } else { pick as usize })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_is_where_the_run_first_became_the_longest() {
        // A flat start, then a fall: every point after the flat part extends the run.
        let losses = [3.0, 3.0, 3.0, 2.5, 2.0, 1.5, 1.0, 0.5, 2.0, 4.0];
        // The longest run ends at 7 (length 6: 0, 3, 4, 5, 6, 7); at each new longest end i the
        // start is i minus the run's length then: 7 - 6 = 1, span 6, pick 1 + 2 + 1.
        assert_eq!(valley(&losses), Some(4));
        assert_eq!(valley(&[1.0]), Some(0));
        assert_eq!(valley(&[1.0, 2.0, 3.0]), Some(0), "nothing falls: the first point");
    }
}
