//! Tests of the console progress: lines, bar refresh, resumed epochs.
use std::sync::{Arc, Mutex};

use super::*;

/// A writer whose bytes the test can read back.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().map_err(|_| std::io::Error::other("poisoned"))?.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn lines(&self) -> Vec<String> {
        let bytes = self.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap().lines().map(str::to_string).collect()
    }
}

#[test]
fn a_resumed_epoch_counts_from_its_restored_batches() {
    let out = Captured::default();
    let mut p = Progress::plain("train", 10, true, Box::new(out.clone()));
    EpochProgress::resume_at(&mut p, 6);
    for _ in 6..10 {
        p.update(4, 1.0);
    }
    p.finish("done");
    let lines = out.lines();
    let shown: Vec<&str> = lines.iter().map(|l| l.get(..14).unwrap_or(l)).collect();
    let want = ["train  [ 7/10]", "train  [ 8/10]", "train  [ 9/10]", "train  [10/10]"];
    assert_eq!(shown[..4], want, "{lines:#?}");
    assert!(lines[3].contains("100.0%"), "{}", lines[3]);
}

#[test]
fn plain_prints_every_tenth_and_summary() {
    let out = Captured::default();
    let mut p = Progress::plain("train", 25, true, Box::new(out.clone()));
    for i in 0..25 {
        // Last batch is short: 4 samples instead of 10.
        let n = if i == 24 { 4 } else { 10 };
        p.update(n, if i == 24 { 2.0 } else { 1.0 });
    }
    p.finish("loss 1.0  acc 50.0%");
    p.finish("again"); // no-op
    let lines = out.lines();
    // every = 25 / 10 = 2: batches 2, 4, ..., 24, then 25 (the last one).
    let expected: Vec<String> =
        (2..=24).step_by(2).chain([25]).map(|b| format!("train  [{b:>2}/25]")).collect();
    assert_eq!(lines.len(), expected.len() + 1, "{lines:#?}");
    for (line, prefix) in lines.iter().zip(&expected) {
        assert!(line.starts_with(prefix.as_str()), "{line:?} vs {prefix:?}");
        assert!(line.contains("img/s"), "{line}");
    }
    assert!(lines[0].contains("  8.0%  loss 1.0000"), "{}", lines[0]);
    // Per-sample mean: (240 * 1.0 + 4 * 2.0) / 244.
    let mean = (240.0 + 8.0) / 244.0;
    assert!((p.mean_loss() - mean).abs() < 1e-12);
    assert!(lines[12].starts_with("train  [25/25] 100.0%"), "{}", lines[12]);
    assert!(lines[12].contains(&format!("loss {mean:.4}")), "{}", lines[12]);
    assert_eq!(lines.last().unwrap(), "train  loss 1.0  acc 50.0%");
    assert_eq!((p.batches(), p.samples()), (25, 244));
}

#[test]
fn advance_asks_for_the_loss_only_when_it_shows_it() {
    let out = Captured::default();
    let mut p = Progress::plain("train", 25, true, Box::new(out.clone()));
    let mut asked = 0;
    for _ in 0..25 {
        p.advance(4, || {
            asked += 1;
            0.5
        });
    }
    // Batches 2, 4, ..., 24 and 25: the lines printed, and nothing in between.
    assert_eq!((asked, out.lines().len()), (13, 13));
    let mut off = Progress::plain("train", 25, false, Box::new(Captured::default()));
    off.advance(4, || panic!("a disabled progress must not read the loss"));
}

#[test]
fn plain_ten_batches_and_early_finish() {
    let out = Captured::default();
    let mut p = Progress::plain("val", 10, true, Box::new(out.clone()));
    for _ in 0..10 {
        p.update(8, 0.5);
    }
    p.finish("");
    let lines = out.lines();
    assert_eq!(lines.len(), 11, "{lines:#?}");
    assert!(lines[0].starts_with("val  [ 1/10]  10.0%  loss 0.5000"), "{}", lines[0]);
    assert!(lines[9].starts_with("val  [10/10] 100.0%"), "{}", lines[9]);
    assert!(lines[10].starts_with("val  done  loss 0.5000"), "{}", lines[10]);

    // Stopped after 7 of 40 batches (every = 4): line at 4, then 7 from finish, then summary.
    let out = Captured::default();
    let mut p = Progress::plain("train", 40, true, Box::new(out.clone()));
    for _ in 0..7 {
        p.update(1, 1.0);
    }
    p.finish("stopped");
    let lines = out.lines();
    assert_eq!(lines.len(), 3, "{lines:#?}");
    assert!(lines[0].starts_with("train  [ 4/40]  10.0%"));
    assert!(lines[1].starts_with("train  [ 7/40]  17.5%"));
    assert_eq!(lines[2], "train  stopped");
}

#[test]
fn disabled_prints_nothing() {
    let out = Captured::default();
    let mut p = Progress::plain("train", 10, false, Box::new(out.clone()));
    for _ in 0..10 {
        p.update(4, 1.0);
    }
    p.finish("summary");
    assert!(out.lines().is_empty());
    assert_eq!(p.samples(), 40);
    // The automatic constructor honours `enabled` too.
    let mut q = Progress::new("train", 3, false);
    q.update(1, 1.0);
    q.finish("x");
    assert!(matches!(q.mode, Mode::Off));
    assert!(ProgressStyle::with_template(BAR_TEMPLATE).is_ok());
}
