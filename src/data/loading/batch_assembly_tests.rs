//! Tests of the batch assembly: several threads in one batch, the first error in order, panics.
use std::collections::HashSet;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use super::*;
use crate::data::DataLoader;
use crate::transforms::AugRng;

/// A data set of `len` 1x2x2 images whose `get` can fail, panic, change shape, sleep, or
/// wait until `rendezvous` threads are inside `get` at once (and whose `target` can panic);
/// it records which thread loaded each sample.
#[derive(Default)]
struct Probe {
    len: usize,
    fail: Vec<usize>,
    panic: Vec<usize>,
    panic_target: Vec<usize>,
    wide: Vec<usize>,
    slow: Vec<usize>,
    rendezvous: usize,
    inside: Mutex<HashSet<ThreadId>>,
    met: Condvar,
    loaded_by: Mutex<Vec<(usize, ThreadId)>>,
}

impl Dataset for Probe {
    fn len(&self) -> usize {
        self.len
    }
    fn get(&self, index: usize, _rng: &mut AugRng) -> Result<(TensorImage, i64)> {
        let me = std::thread::current().id();
        self.loaded_by.lock().unwrap().push((index, me));
        if self.rendezvous > 0 {
            // Wait (10 s at most) until enough threads are loading at once.
            let mut inside = self.inside.lock().unwrap();
            inside.insert(me);
            self.met.notify_all();
            let deadline = Instant::now() + Duration::from_secs(10);
            while inside.len() < self.rendezvous && Instant::now() < deadline {
                inside = self.met.wait_timeout(inside, Duration::from_millis(50)).unwrap().0;
            }
        }
        if self.slow.contains(&index) {
            std::thread::sleep(Duration::from_millis(200));
        }
        if self.fail.contains(&index) {
            return Err(Error::Dataset(format!("sample {index} is unreadable")));
        }
        assert!(!self.panic.contains(&index), "the probe panics at {index}");
        let width = if self.wide.contains(&index) { 3 } else { 2 };
        let data = vec![index as f32; 2 * width];
        Ok((TensorImage { channels: 1, height: 2, width, data }, index as i64 % 3))
    }
    fn label(&self, index: usize) -> i64 {
        index as i64 % 3
    }
    fn classes(&self) -> Vec<String> {
        vec!["a".into(), "b".into(), "c".into()]
    }
    fn target(&self, index: usize) -> Option<Vec<f32>> {
        assert!(!self.panic_target.contains(&index), "the probe's target panics at {index}");
        None
    }
}

fn first_error(probe: Probe, workers: usize) -> String {
    let mut loader = DataLoader::new(probe, 4).num_workers(workers);
    let results: Vec<_> = loader.iter().collect();
    assert!(results.last().unwrap().is_err(), "the iteration ends at the failing batch");
    results.into_iter().find_map(|r| r.err()).unwrap().to_string()
}

#[test]
fn the_first_batch_is_shared_out_among_the_workers() {
    // Each `get` waits until two threads are loading: one thread per batch would load
    // batch 0's samples alone and never meet a second one inside batch 0.
    let probe = Arc::new(Probe { len: 12, rendezvous: 2, ..Probe::default() });
    let mut loader = DataLoader::from_arc(probe.clone(), 4).num_workers(4);
    let first = loader.iter().next().unwrap().unwrap();
    assert_eq!(first.indices, [0, 1, 2, 3]);
    let threads: HashSet<ThreadId> = probe
        .loaded_by
        .lock()
        .unwrap()
        .iter()
        .filter(|(index, _)| *index < 4)
        .map(|(_, t)| *t)
        .collect();
    assert!(threads.len() >= 2, "batch 0 was loaded by {} thread(s)", threads.len());
    let values: Vec<f32> = Vec::try_from(first.images.flatten(0, -1)).unwrap();
    let expected: Vec<f32> = (0..4).flat_map(|i| [i as f32; 4]).collect();
    assert_eq!(values, expected, "each sample in its own slot");
    assert_eq!(Vec::<i64>::try_from(&first.labels).unwrap(), [0, 1, 2, 0]);
}

#[test]
fn a_batch_fails_with_its_first_failing_sample_in_order() {
    // Samples 5 and 6 of batch 1 fail; 5 is slow, so 6's error comes in first.
    for workers in [0, 1, 4] {
        let probe = Probe { len: 12, fail: vec![5, 6], slow: vec![5], ..Probe::default() };
        let err = first_error(probe, workers);
        assert!(err.contains("sample 5 is unreadable"), "{workers} workers: {err}");
    }
    // A shape that differs from the batch's first sample, before a failing one.
    for workers in [0, 4] {
        let probe = Probe { len: 8, wide: vec![6], fail: vec![7], ..Probe::default() };
        let err = first_error(probe, workers);
        assert!(err.contains("sample 6 has shape [1, 2, 3] but the batch has [1, 2, 2]"), "{err}");
    }
    // The batch's first sample arrives last and differs from the others.
    let probe = Probe { len: 4, wide: vec![1, 2, 3], slow: vec![0], ..Probe::default() };
    let err = first_error(probe, 4);
    assert!(err.contains("sample 1 has shape [1, 2, 3] but the batch has [1, 2, 2]"), "{err}");
}

#[test]
fn a_panic_in_the_data_set_is_an_error_naming_the_sample() {
    for workers in [0, 3] {
        let err = first_error(Probe { len: 8, panic: vec![6], ..Probe::default() }, workers);
        assert!(err.contains("panicked loading sample 6"), "{workers} workers: {err}");
        let probe = Probe { len: 8, panic_target: vec![5], ..Probe::default() };
        let err = first_error(probe, workers);
        assert!(err.contains("targets of samples [4, 5, 6, 7]"), "{workers} workers: {err}");
    }
}
