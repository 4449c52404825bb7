//! The batch-size finder (`Trainer::find_batch_size`, Lightning's `Tuner.scale_batch_size`):
//! on the CPU a trial's peak resident memory is measured (it grows with the batch by at least
//! the activations the arithmetic says a batch keeps), a memory limit stops the doubling at a
//! size that fits below it, the next above it, and a
//! real out-of-memory error of libtorch's CPU allocator (an allocation no machine can make) is
//! caught as "does not fit", whether the step returns it as an error or panics with it; the
//! search is Lightning's (`power` backs off to the last size that fitted, `binsearch` narrows to
//! neighbours); any other error ends the search; afterwards the weights, the optimizer's state,
//! the random generator and the loader's batch size are as before, bit for bit.
use crate::common;

use std::sync::{Arc, Mutex, PoisonError};

use tch::nn::{self, ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::dist::{cpu_rng_state, Dist};
use trainbook::fit::Trainer;
use trainbook::train::{
    find_batch_size_step, train_epoch, BatchSizeFindOptions, CrossEntropyLoss, EpochOptions,
    Optimizer, ScaleMode, StepBatch, StepOutput, TrainStep,
};

/// The process's peak memory is one for all: the tests here take turns.
static SERIAL: Mutex<()> = Mutex::new(());

const SIDE: i64 = 64;
const CHANNELS: i64 = 32;

fn data(n: i64) -> Arc<TensorDataset> {
    tch::manual_seed(3);
    let x = Tensor::randn([n, 3, SIDE, SIDE], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(4, [n], (Kind::Int64, Device::Cpu));
    Arc::new(TensorDataset::new(&x, &y, (0..4).map(|c| c.to_string()).collect()).unwrap())
}

/// A convolution of `CHANNELS` at full size, a ReLU and a linear head.
fn net(vs: &VarStore) -> impl ModuleT {
    let root = vs.root();
    let conv = nn::conv2d(
        &root / "conv",
        3,
        CHANNELS,
        3,
        nn::ConvConfig { padding: 1, ..Default::default() },
    );
    let head = nn::linear(&root / "head", CHANNELS, 4, Default::default());
    nn::seq_t()
        .add(conv)
        .add_fn(|x| x.relu().mean_dim(&[2i64, 3][..], false, None::<Kind>))
        .add(head)
}

/// The weights, the optimizer's state and the CPU generator's state.
fn snapshot(vs: &VarStore, opt: &Optimizer) -> Vec<(String, Tensor)> {
    let mut all = common::training_state(vs, opt);
    all.push(("rng".into(), Tensor::from_slice(&cpu_rng_state().unwrap())));
    all
}

fn assert_same(a: &[(String, Tensor)], b: &[(String, Tensor)]) {
    assert_eq!(a.len(), b.len());
    for ((na, ta), (nb, tb)) in a.iter().zip(b) {
        assert_eq!(na, nb);
        assert!(ta.equal(tb), "{na} changed");
    }
}

#[test]
fn the_cpu_peak_grows_with_the_batch_and_a_limit_stops_the_doubling() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let dist = Dist::single(Device::Cpu);
    let mut vs = VarStore::new(Device::Cpu);
    let model = net(&vs);
    let mut opt = Optimizer::adam(&vs, 1e-3);
    let mut loader = DataLoader::from_arc(data(256), 8).shuffle(true).num_workers(0);
    // A first epoch so that the optimizer has state to put back.
    loader.set_limit_batches(Some(2));
    let opts = EpochOptions::on(Device::Cpu).progress(false);
    train_epoch(&model, &mut loader, &mut opt, &CrossEntropyLoss::new(), &opts).unwrap();
    loader.set_limit_batches(None);
    let before = snapshot(&vs, &opt);
    let trainer = Trainer::new(&dist);

    // Everything fits: the doubling ends once a batch holds the 256 samples.
    let roomy = BatchSizeFindOptions { max_memory: Some(u64::MAX), ..Default::default() };
    let all = trainer.find_batch_size(&mut vs, &model, &mut opt, &mut loader, roomy).unwrap();
    let sizes: Vec<usize> = all.trials.iter().map(|t| t.batch_size).collect();
    assert_eq!(sizes, [2, 4, 8, 16, 32, 64, 128, 256]);
    assert_eq!(all.batch_size, 256);
    assert!(all.trials.iter().all(|t| t.fits && t.reason.is_none()));
    // A step at batch b holds the convolution's output [b, 32, 64, 64] in float32 for the
    // backward pass (512 KiB a sample), so 256 samples need at least 254 * 512 KiB more than 2
    // (the process's resident set varies by some 16 MiB from one trial to the next).
    let peak =
        |b: usize| all.trials.iter().find(|t| t.batch_size == b).unwrap().peak_bytes.unwrap();
    let per_sample = (CHANNELS * SIDE * SIDE * 4) as u64;
    assert!(peak(256) >= peak(2) + 254 * per_sample, "peaks {} and {}", peak(2), peak(256));
    assert_same(&before, &snapshot(&vs, &opt));
    assert_eq!(loader.batch_size(), 8);

    // A limit between the peaks of 16 and 128 samples stops the doubling on its way.
    let limit = (peak(16) + peak(128)) / 2;
    let tight = BatchSizeFindOptions { max_memory: Some(limit), ..Default::default() };
    let found = trainer.find_batch_size(&mut vs, &model, &mut opt, &mut loader, tight).unwrap();
    let last = found.trials.last().unwrap();
    assert!(!last.fits && last.peak_bytes.unwrap() > limit, "{found:?}");
    assert!(last.reason.as_ref().unwrap().contains("above the limit"), "{found:?}");
    assert_eq!(last.batch_size, 2 * found.batch_size, "{found:?}");
    let answer = found.trials.iter().find(|t| t.batch_size == found.batch_size).unwrap();
    assert!(answer.fits && answer.peak_bytes.unwrap() <= limit, "{found:?}");
    assert!((16..128).contains(&found.batch_size), "{found:?}");
    assert_same(&before, &snapshot(&vs, &opt));
}

/// A step that asks for an allocation no machine can make (2^52 bytes) once the batch has
/// `fails_from` samples: returned as an error, or (`panics`) through tch's panicking call.
struct Greedy<'a> {
    model: &'a dyn ModuleT,
    fails_from: i64,
    panics: bool,
    other_error_from: Option<i64>,
}

impl TrainStep for Greedy<'_> {
    fn train_step(&self, b: &StepBatch<'_>) -> trainbook::Result<StepOutput> {
        let n = b.images.size()[0];
        if self.other_error_from.is_some_and(|k| n >= k) {
            let wrong = Tensor::zeros([n, 5], (Kind::Float, Device::Cpu));
            let _ = wrong.f_matmul(&Tensor::zeros([7, 2], (Kind::Float, Device::Cpu)))?;
        }
        if n >= self.fails_from {
            let size = [1i64 << 50];
            if self.panics {
                let _ = Tensor::empty(size, (Kind::Float, Device::Cpu));
            } else {
                let _ = Tensor::f_empty(size, (Kind::Float, Device::Cpu))?;
            }
        }
        let output = self.model.forward_t(b.images, true);
        Ok(StepOutput { loss: CrossEntropyLoss::new().mean(&output, b.target), output })
    }
    fn eval_step(&self, b: &StepBatch<'_>) -> trainbook::Result<StepOutput> {
        let output = self.model.forward_t(b.images, false);
        Ok(StepOutput { loss: CrossEntropyLoss::new().per_sample(&output, b.target), output })
    }
}

#[test]
fn out_of_memory_errors_and_panics_do_not_fit_and_other_errors_end_the_search() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let vs = VarStore::new(Device::Cpu);
    let model = net(&vs);
    let mut opt = Optimizer::sgd(&vs, 0.1, 0.9);
    let mut loader = DataLoader::from_arc(data(128), 4).num_workers(0);
    let before = snapshot(&vs, &opt);
    let opts = || EpochOptions::on(Device::Cpu);
    let find =
        |mode| BatchSizeFindOptions { mode, max_memory: Some(u64::MAX), ..Default::default() };
    for panics in [false, true] {
        let step = Greedy { model: &model, fails_from: 32, panics, other_error_from: None };
        let power = find_batch_size_step(
            (&vs, &step),
            &mut loader,
            &mut opt,
            opts(),
            find(ScaleMode::Power),
        );
        let power = power.unwrap();
        let sizes: Vec<usize> = power.trials.iter().map(|t| t.batch_size).collect();
        assert_eq!((sizes, power.batch_size), (vec![2, 4, 8, 16, 32], 16), "panics: {panics}");
        let reason = power.trials[4].reason.clone().unwrap();
        assert!(reason.contains("DefaultCPUAllocator: can't allocate memory"), "{reason}");
        let bin = find_batch_size_step(
            (&vs, &step),
            &mut loader,
            &mut opt,
            opts(),
            find(ScaleMode::BinSearch),
        );
        let bin = bin.unwrap();
        let sizes: Vec<usize> = bin.trials.iter().map(|t| t.batch_size).collect();
        assert_eq!((sizes, bin.batch_size), (vec![2, 4, 8, 16, 32, 24, 28, 30, 31], 31));
        assert_same(&before, &snapshot(&vs, &opt));
        assert_eq!(loader.batch_size(), 4);
    }
    // Any other error is the finder's error, with everything put back.
    let step = Greedy { model: &model, fails_from: 1000, panics: false, other_error_from: Some(8) };
    let err =
        find_batch_size_step((&vs, &step), &mut loader, &mut opt, opts(), find(ScaleMode::Power))
            .unwrap_err()
            .to_string();
    assert!(err.contains("cannot be multiplied"), "{err}");
    assert_same(&before, &snapshot(&vs, &opt));
    // Nothing fits: an error naming the smallest size tried.
    let step = Greedy { model: &model, fails_from: 1, panics: true, other_error_from: None };
    let err =
        find_batch_size_step((&vs, &step), &mut loader, &mut opt, opts(), find(ScaleMode::Power))
            .unwrap_err()
            .to_string();
    assert!(err.contains("no batch size fits") && err.contains("smallest 1"), "{err}");
    assert_same(&before, &snapshot(&vs, &opt));
}

#[test]
fn the_cpu_needs_a_limit_and_the_finder_needs_one_process() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let mut vs = VarStore::new(Device::Cpu);
    let model = net(&vs);
    let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
    let mut loader = DataLoader::from_arc(data(16), 4).num_workers(0);
    let dist = Dist::single(Device::Cpu);
    let err = Trainer::new(&dist)
        .find_batch_size(&mut vs, &model, &mut opt, &mut loader, BatchSizeFindOptions::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("needs a memory limit") && err.contains("max_memory"), "{err}");
    let ranks = trainbook::launch::spawn(2, |dist| {
        let mut vs = VarStore::new(Device::Cpu);
        let model = net(&vs);
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
        let mut loader = DataLoader::from_arc(data(16), 4).num_workers(0);
        let find = BatchSizeFindOptions { max_memory: Some(u64::MAX), ..Default::default() };
        let err = Trainer::new(dist).find_batch_size(&mut vs, &model, &mut opt, &mut loader, find);
        Ok(err.unwrap_err().to_string())
    })
    .unwrap();
    for err in ranks {
        assert!(err.contains("runs on one process, not 2 ranks"), "{err}");
    }
}
