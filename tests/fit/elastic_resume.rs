//! Elastic resume: a run checkpointed mid-epoch on 2 Gloo thread ranks continues on 1, and one
//! checkpointed on 1 rank continues on 2, with the same global batch (the accumulation adjusted
//! and recorded) and the same samples in every optimizer step, so the final weights equal the
//! uninterrupted run's within float rounding.
//!
//! The bound, derived: the two runs take the same samples in the same optimizer steps from the
//! same weights; what differs is only how each step's gradient is summed (per rank, then over
//! the ranks, or micro-batch by micro-batch), which changes the float32 rounding of the sums.
//! Each run is then a float32 approximation of one exact trajectory, and its distance from that
//! trajectory is the rounding its float32 arithmetic carries anyway. The test measures that
//! rounding as the uninterrupted run's distance from the same run in float64 (`E`, the
//! Euclidean norm over all weights, where single last-bit differences average out), and
//! asserts the resumed run is within `2 E` of the uninterrupted one (each of the two float32
//! runs is about `E` from the exact trajectory). A resume that took other samples would move
//! the weights by a whole step's update, far above `E`.
use crate::common;

use std::path::Path;
use std::sync::Arc;

use tch::nn::{self, ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::checkpoint::Policy;
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::fit::{FitReport, Trainer};
use trainbook::launch::spawn;
use trainbook::train::Optimizer;

/// A small CNN without dropout or BatchNorm (their random draws and per-batch statistics
/// would change with the rank count), computing in `kind`.
#[derive(Debug)]
struct Small {
    conv: nn::Conv2D,
    fc: nn::Linear,
    kind: Kind,
}

impl Small {
    fn new(vs: &VarStore, kind: Kind) -> Small {
        let root = vs.root();
        let conv = nn::conv2d(&root / "conv", 1, 4, 3, Default::default());
        let fc = nn::linear(&root / "fc", 4 * 6 * 6, 10, Default::default());
        Small { conv, fc, kind }
    }
}

impl ModuleT for Small {
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        xs.to_kind(self.kind).apply(&self.conv).relu().flatten(1, -1).apply(&self.fc)
    }
}

/// libtorch's random generator is shared by the test threads: one test at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn data() -> Arc<TensorDataset> {
    tch::manual_seed(5);
    let x = Tensor::randn([48, 1, 8, 8], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [48], (Kind::Int64, Device::Cpu));
    Arc::new(TensorDataset::new(&x, &y, (0..10).map(|c| c.to_string()).collect()).unwrap())
}

/// Two epochs (6 optimizer steps each: 48 samples, a global batch of 8) on `world` ranks of
/// batch 4 with `accumulate` batches per step, from the weights in `init`, in `kind`, with a
/// checkpoint after every step; resumes from `out` when a checkpoint is there.
fn run(out: &Path, init: &Path, world: usize, accumulate: usize, kind: Kind) -> FitReport {
    let ds = data();
    let reports = spawn(world, |dist| {
        let mut vs = VarStore::new(Device::Cpu);
        let net = Small::new(&vs, kind);
        trainbook::models::load_weights(&mut vs, init, true)?;
        if kind == Kind::Double {
            vs.double();
        }
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.9);
        let mut train = DataLoader::from_arc(ds.clone(), 4).distributed(dist).num_workers(0);
        let mut val = DataLoader::from_arc(ds.clone(), 4).distributed(dist).num_workers(0);
        let policy = Policy { every_epochs: None, every_steps: Some(1), keep_last: 20, best: None };
        Trainer::new(dist)
            .epochs(2)
            .out(out)
            .progress(false)
            .policy(policy)
            .accumulate(accumulate)
            .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
    })
    .unwrap();
    reports.into_iter().next().unwrap()
}

/// Copies `from`'s checkpoint after optimizer step `step` into `to`'s checkpoints, as a run
/// killed after that step leaves it.
fn killed_after(from: &Path, step: u64, to: &Path) {
    for e in std::fs::read_dir(from.join("checkpoints")).unwrap() {
        let dir = e.unwrap().path();
        let Ok(text) = std::fs::read_to_string(dir.join("manifest.json")) else { continue };
        let m: serde_json::Value = serde_json::from_str(&text).unwrap();
        if m["global_step"].as_u64() == Some(step) {
            let target = to.join("checkpoints").join(dir.file_name().unwrap());
            std::fs::create_dir_all(&target).unwrap();
            for f in std::fs::read_dir(&dir).unwrap() {
                let f = f.unwrap();
                std::fs::copy(f.path(), target.join(f.file_name())).unwrap();
            }
            return;
        }
    }
    panic!("no checkpoint of step {step} in {}", from.display());
}

fn weights(out: &Path) -> Vec<(String, Tensor)> {
    common::sorted_tensors(&out.join("model.safetensors"))
}

/// The Euclidean distance between two runs' weights, all tensors together (in float64): a
/// norm over thousands of values, so single last-bit differences average out.
fn distance(a: &[(String, Tensor)], b: &[(String, Tensor)]) -> f64 {
    let squares: f64 = a
        .iter()
        .zip(b)
        .map(|((na, ta), (nb, tb))| {
            assert_eq!(na, nb);
            (ta.to_kind(Kind::Double) - tb.to_kind(Kind::Double))
                .square()
                .sum(Kind::Double)
                .double_value(&[])
        })
        .sum();
    squares.sqrt()
}

/// The last checkpoint's recorded data layout (world size, batch, accumulation).
fn last_layout(out: &Path) -> (u64, u64, u64) {
    let mut last = (0, serde_json::Value::Null);
    for e in std::fs::read_dir(out.join("checkpoints")).unwrap() {
        let Ok(text) = std::fs::read_to_string(e.unwrap().path().join("manifest.json")) else {
            continue;
        };
        let m: serde_json::Value = serde_json::from_str(&text).unwrap();
        let step = m["global_step"].as_u64().unwrap();
        if step >= last.0 {
            last = (step, m["parts"]["data_layout"]["value"].clone());
        }
    }
    let v = |k: &str| last.1[k].as_u64().unwrap();
    (v("world_size"), v("batch_size"), v("accumulate"))
}

#[test]
fn a_run_resumes_on_another_number_of_ranks_with_the_same_global_batch() {
    let _turn = common::module_turn(module_path!());
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("elastic-resume");
    tch::manual_seed(3);
    let vs = VarStore::new(Device::Cpu);
    let _net = Small::new(&vs, Kind::Float);
    let init = work.join("init.safetensors");
    trainbook::models::save_safetensors(&vs, &init).unwrap();

    // (ranks, accumulation) of the uninterrupted run, then of the resumed one as asked for:
    // 2 x 4 -> 1 x 4 (fit accumulates 2), and 1 x 4 x 2 -> 2 x 4 x 2 (fit accumulates 1).
    for ((world, k), (new_world, new_k), want_k) in [((2, 1), (1, 1), 2), ((1, 2), (2, 2), 1)] {
        let name = format!("{world}x{k}-to-{new_world}");
        let (whole, exact, resumed) = (
            work.join(format!("{name}-whole")),
            work.join(format!("{name}-f64")),
            work.join(&name),
        );
        let report = run(&whole, &init, world, k, Kind::Float);
        assert_eq!(report.history.len(), 2);
        run(&exact, &init, world, k, Kind::Double);
        killed_after(&whole, 3, &resumed);
        let r = run(&resumed, &init, new_world, new_k, Kind::Float);
        let (_, epoch, batches) = r.resumed_from.clone().expect("resumed");
        assert_eq!((epoch, batches), (0, 3 * k as u64), "{name}: mid-epoch 0, after step 3");
        assert_eq!(last_layout(&resumed), (new_world as u64, 4, want_k), "{name}: recorded");

        let rounding = distance(&weights(&whole), &weights(&exact));
        let moved = distance(&weights(&whole), &weights(&resumed));
        assert!(rounding > 0.0, "{name}: float32 and float64 runs should differ");
        assert!(
            moved <= 2.0 * rounding,
            "{name}: the resumed weights are {moved:e} from the uninterrupted run's; the run's \
             own float32 rounding is {rounding:e}"
        );
        println!("{name}: resumed vs uninterrupted {moved:e}, float32 vs float64 {rounding:e}");
        let last = |r: &FitReport| r.history.last().unwrap().val_loss.unwrap();
        assert!((last(&r) - last(&report)).abs() <= 1e-5 * last(&report), "{name}");
    }
}

#[test]
fn a_global_batch_the_new_ranks_cannot_make_is_an_error_naming_both_layouts() {
    let _turn = common::module_turn(module_path!());
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("elastic-resume-bad");
    tch::manual_seed(3);
    let vs = VarStore::new(Device::Cpu);
    let _net = Small::new(&vs, Kind::Float);
    let init = work.join("init.safetensors");
    trainbook::models::save_safetensors(&vs, &init).unwrap();
    // 1 rank x 4 (a global batch of 4) continued on 2 ranks x 4: no accumulation makes 4.
    let ds = data();
    let whole = work.join("whole");
    run(&whole, &init, 1, 1, Kind::Float);
    killed_after(&whole, 6, &work.join("resumed"));
    let errors = spawn(2, |dist| {
        let mut vs = VarStore::new(Device::Cpu);
        let net = Small::new(&vs, Kind::Float);
        trainbook::models::load_weights(&mut vs, &init, true)?;
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.9);
        let mut train = DataLoader::from_arc(ds.clone(), 4).distributed(dist).num_workers(0);
        let mut val = DataLoader::from_arc(ds.clone(), 4).distributed(dist).num_workers(0);
        let trainer = Trainer::new(dist).epochs(2).out(work.join("resumed")).progress(false);
        Ok(trainer.fit(&mut vs, &net, &mut opt, &mut train, &mut val).unwrap_err().to_string())
    })
    .unwrap();
    for e in errors {
        assert!(
            e.contains("checkpoint of 1 ranks x batch 4 x accumulation 1 on 2 ranks x batch 4"),
            "{e}"
        );
        assert!(e.contains("global batch of 4 is not a multiple of 8"), "{e}");
    }
}
