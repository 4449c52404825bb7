//! Preparing a stand-in data set twice at once (two notebooks sharing `data/`, the ranks of a
//! job): both calls succeed, the folder only ever appears whole, and nothing is left beside it.
use crate::common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use trainbook::data::{ensure_designsafe, ensure_stanford_dogs, ensure_tiny_imagenet};

/// JPEG files anywhere under `dir`.
fn jpegs(dir: &Path) -> usize {
    walk(dir)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("jpg") || e == "JPEG"))
        .count()
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[test]
fn two_preparations_at_once_both_succeed_and_nobody_sees_half_a_set() {
    let _turn = common::module_turn(module_path!());
    let scratch = common::WorkDir::new("data-preparation");
    let designsafe = scratch.join("designsafe-small/Dataset_2");
    let (tiny, dogs) = (scratch.join("tiny-imagenet-small"), scratch.join("stanford-dogs-small"));
    let done = AtomicBool::new(false);
    // What a reader found whenever the DesignSafe folder looked ready to `ensure_designsafe`.
    let sightings = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut counts = Vec::new();
            while !done.load(Ordering::Relaxed) {
                if designsafe.join("Train").is_dir() && designsafe.join("Validation").is_dir() {
                    counts.push(jpegs(&designsafe));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            counts
        });
        let calls: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    ensure_designsafe(&designsafe, true)?;
                    ensure_tiny_imagenet(&tiny, true)?;
                    ensure_stanford_dogs(&dogs, true)
                })
            })
            .collect();
        let results: Vec<_> = calls.into_iter().map(|c| c.join()).collect();
        done.store(true, Ordering::Relaxed);
        for result in results {
            result.unwrap().unwrap();
        }
        reader.join().unwrap()
    });
    // The small DesignSafe stand-in: 450 training and 90 validation pictures.
    assert_eq!(jpegs(&designsafe), 540);
    assert!(!sightings.is_empty(), "the reader never saw the folder");
    assert!(sightings.iter().all(|&n| n == 540), "a reader saw part of the set: {sightings:?}");
    // Tiny ImageNet small: 10 classes of 20 training pictures, 50 validation, 50 test.
    assert_eq!(std::fs::read_to_string(tiny.join("wnids.txt")).unwrap().lines().count(), 10);
    assert_eq!(jpegs(&tiny), 10 * 20 + 50 + 50);
    // Stanford Dogs small: 6 breeds of 40 pictures.
    assert_eq!(jpegs(&dogs.join("Images")), 6 * 40);
    // The private folders the generators wrote into are gone.
    for parent in [designsafe.parent().unwrap(), &scratch] {
        let left: Vec<String> = std::fs::read_dir(parent)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(left.is_empty(), "{}: left behind {left:?}", parent.display());
    }
}
