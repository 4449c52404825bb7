//! A run stopped by SIGTERM after its first mid-epoch checkpoint and run again: what the
//! examples' resume tests share.
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Starts `command()` (a run into `out`), sends it SIGTERM once a `step-*` checkpoint is complete
/// in `out/checkpoints`, checks that it exits with status 99 (stopped, to be requeued), then runs
/// `command()` again to its end and checks that it resumed.
pub fn stop_and_resume(mut command: impl FnMut() -> Command, out: &Path) {
    let mut child = command().stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let start = Instant::now();
    while !has_step_checkpoint(&out.join("checkpoints")) {
        assert!(start.elapsed() < Duration::from_secs(300), "no checkpoint appeared");
        assert!(child.try_wait().unwrap().is_none(), "the run ended before a checkpoint");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let o = super::wait_with_deadline(child, Duration::from_secs(300), "the stopped run");
    assert_eq!(o.status.code(), Some(99), "a stop by SIGTERM exits 99");
    let again =
        super::run_with_deadline(&mut command(), Duration::from_secs(600), "the resumed run");
    let text = super::text(&again);
    assert!(again.status.success() && text.contains("resuming from"), "{text}");
}

/// Whether `dir` holds a `step-*` checkpoint whose manifest is written.
pub fn has_step_checkpoint(dir: &Path) -> bool {
    std::fs::read_dir(dir).into_iter().flatten().flatten().any(|e| {
        e.file_name().to_string_lossy().starts_with("step-")
            && e.path().join("manifest.json").exists()
    })
}
