use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use super::*;
use crate::train::Optimizer;

fn header(seed: u64) -> TrailHeader {
    TrailHeader {
        every: 2,
        trainbook: "test".into(),
        program: Some("p".into()),
        program_crc32: Some("00000000".into()),
        world_size: 1,
        seed,
        config: serde_json::Value::Null,
        train_samples: 10,
        batch_size: 2,
    }
}

fn model() -> (VarStore, Optimizer) {
    let vs = VarStore::new(Device::Cpu);
    let root = vs.root();
    let _w = root.var("w", &[3, 2], tch::nn::Init::Const(0.5));
    let _b = root.zeros_no_train("running_mean", &[3]);
    let opt = Optimizer::sgd(&vs, 0.1, 0.9);
    (vs, opt)
}

#[test]
fn steps_are_recorded_every_n_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let (vs, opt) = model();
    let mut rec = TrailRecorder::start(dir.path(), header(1), None).unwrap();
    for step in 1..=5 {
        rec.after_step((step, 0, step), &vs, &opt).unwrap();
    }
    let trail = read_trail(dir.path()).unwrap();
    assert_eq!(trail.headers, vec![(0, header(1))]);
    assert_eq!(trail.steps.iter().map(|s| s.step).collect::<Vec<_>>(), [2, 4]);
    let names: Vec<&str> = trail.steps[0].tensors.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["running_mean", "w"], "every variable, buffers too, in name order");
    assert_eq!(trail.steps[0], TrailStep { step: 2, batches_done: 2, ..trail.steps[1].clone() });
}

#[test]
fn a_changed_tensor_changes_its_checksum_and_the_total_only() {
    let (vs, _) = model();
    let (before, each_before) = weights_checksums(&vs).unwrap();
    let _ = tch::no_grad(|| vs.root().get("running_mean").unwrap().fill_(1e-30));
    let (after, each_after) = weights_checksums(&vs).unwrap();
    assert_ne!(before, after);
    assert_ne!(each_before[0], each_after[0]);
    assert_eq!(each_before[1], each_after[1]);
    let t = Tensor::zeros([2, 3], (Kind::Float, Device::Cpu));
    assert_ne!(tensor_checksum("t", &t).unwrap(), tensor_checksum("t", &t.view([3, 2])).unwrap());
}

#[test]
fn a_resumed_run_keeps_the_steps_up_to_its_checkpoint_and_says_when_its_header_changed() {
    let dir = tempfile::tempdir().unwrap();
    let (vs, opt) = model();
    let mut rec = TrailRecorder::start(dir.path(), header(1), None).unwrap();
    for step in 1..=6 {
        rec.after_step((step, 0, step), &vs, &opt).unwrap();
    }
    drop(rec);
    // Killed while writing a line: the cut line is left out.
    let path = dir.path().join(TRAIL_FILE);
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str("{\"step\":{\"step\":8,");
    std::fs::write(&path, &text).unwrap();
    assert_eq!(read_trail(&path).unwrap().steps.len(), 3);

    // Resumed from step 4 with the same header: steps 2 and 4 stay, no second header.
    let mut rec = TrailRecorder::start(dir.path(), header(1), Some(4)).unwrap();
    rec.after_step((6, 0, 6), &vs, &opt).unwrap();
    drop(rec);
    let trail = read_trail(&path).unwrap();
    assert_eq!(trail.headers.len(), 1);
    assert_eq!(trail.steps.iter().map(|s| s.step).collect::<Vec<_>>(), [2, 4, 6]);

    // Resumed from step 2 by another build: its header follows step 2.
    let rec = TrailRecorder::start(dir.path(), header(7), Some(2)).unwrap();
    drop(rec);
    let trail = read_trail(&path).unwrap();
    assert_eq!(trail.headers, vec![(0, header(1)), (2, header(7))]);
    let fresh = read_trail(&path).unwrap();
    let found = compare(&fresh, &trail);
    assert!(found.header_differences.iter().any(|d| d.field == "header"), "{found}");
}

#[test]
fn a_file_that_is_not_a_trail_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.jsonl");
    std::fs::write(&path, "{\"nonsense\": 1}\n{}\n").unwrap();
    let err = read_trail(&path).unwrap_err().to_string();
    assert!(
        err.contains("t.jsonl") && err.contains("weight trail") && err.contains("line 1"),
        "{err}"
    );
    std::fs::write(&path, "").unwrap();
    assert!(read_trail(&path).unwrap_err().to_string().contains("no header line"));
    assert!(read_trail(dir.path().join("missing")).unwrap_err().to_string().contains("missing"));
}
