//! The training loop does not wait for the device at every step: its running loss and correct
//! counts stay on the device and are read back only for progress lines, checkpoints and the
//! epoch's end ([`trainbook::train::host_reads`] counts those reads; norm clipping adds one, for
//! the epoch's mean norm). The summaries it returns
//! are still the exact per-sample values.
use crate::common;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::models::MnistNet;
use trainbook::train::{
    evaluate, host_reads, train_epoch, CrossEntropyLoss, EpochOptions, GradClip, Optimizer,
};

const BATCHES: usize = 40;

/// `host_reads` counts the whole process's reads: the tests that count them take turns.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn loader() -> (DataLoader<TensorDataset>, Tensor, Tensor) {
    tch::manual_seed(3);
    let n = BATCHES as i64 * 2;
    let x = Tensor::randn([n, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [n], (Kind::Int64, Device::Cpu));
    let ds = TensorDataset::new(&x, &y, (0..10).map(|c| c.to_string()).collect()).unwrap();
    (DataLoader::new(ds, 2).num_workers(0), x, y)
}

#[test]
fn an_epoch_reads_the_device_once_without_progress_and_rarely_with_it() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::adam(&vs, 1e-3);
    let loss_fn = CrossEntropyLoss::new();
    let (mut data, x, y) = loader();

    let before = host_reads();
    let t =
        train_epoch(&net, &mut data, &mut opt, &loss_fn, &EpochOptions::on(Device::Cpu).quiet())
            .unwrap();
    assert_eq!(
        host_reads() - before,
        1,
        "quiet training epoch of {BATCHES} steps: one read, at its end"
    );
    assert_eq!(t.samples, BATCHES as u64 * 2);
    assert!(t.loss.is_finite() && (0.0..=1.0).contains(&t.accuracy), "{t}");

    let before = host_reads();
    let v = evaluate(&net, &mut data, &loss_fn, &EpochOptions::on(Device::Cpu).quiet()).unwrap();
    assert_eq!(host_reads() - before, 1, "quiet evaluation: one read, at its end");

    // The exact per-sample evaluation loss, recomputed in one go on the whole data set.
    // Tolerance: float32 logits of a batch of 2 and of 80 may round differently (a few ulps,
    // ~1e-6 relative after the convolutions' and fc1's long sums); 1e-5 covers it.
    let logits = tch::no_grad(|| net.forward_t(&x, false));
    let want =
        loss_fn.per_sample(&logits, &y).sum(Kind::Double).double_value(&[]) / y.size()[0] as f64;
    assert!(
        (v.loss - want).abs() <= 1e-5 * want.abs(),
        "evaluate loss {} vs whole-set {want}",
        v.loss
    );

    // Norm clipping adds one read, at the epoch's end (its mean norm), however many steps.
    let before = host_reads();
    let clipped = EpochOptions::on(Device::Cpu).quiet().clip_grad(GradClip::norm(1.0));
    let c = train_epoch(&net, &mut data, &mut opt, &loss_fn, &clipped).unwrap();
    assert_eq!(host_reads() - before, 2, "quiet clipped epoch: the metrics and the mean norm");
    assert!(c.grad_norm.is_some_and(f64::is_finite));

    // With progress shown, reads follow the display (about a tenth of the epoch, or a bar's
    // refresh interval), not the steps.
    let before = host_reads();
    train_epoch(&net, &mut data, &mut opt, &loss_fn, &EpochOptions::on(Device::Cpu)).unwrap();
    let reads = host_reads() - before;
    assert!((1..=12).contains(&reads), "{reads} reads for {BATCHES} steps with progress");
}

/// A resumed epoch (batches skipped, the earlier part's metrics restored): its summary counts
/// all the epoch's samples, but its rate only those trained now, in the time it took; still one
/// read of the device.
#[test]
fn a_resumed_epoch_rates_only_what_it_trained() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    use trainbook::train::RunningMetrics;
    let vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, 1e-2, 0.9);
    let (mut data, _, _) = loader();
    data.skip_batches(30);
    let restored = RunningMetrics { loss_sum: 60.0, correct: 7, count: 60, ..Default::default() };
    let before = host_reads();
    let opts = EpochOptions::on(Device::Cpu).quiet().start_metrics(restored);
    let t = train_epoch(&net, &mut data, &mut opt, &CrossEntropyLoss::new(), &opts).unwrap();
    assert_eq!(host_reads() - before, 1);
    assert_eq!((t.samples, t.steps), (BATCHES as u64 * 2, BATCHES as u64 - 30));
    let trained = (BATCHES as f64 - 30.0) * 2.0;
    assert!((t.img_per_s * t.seconds - trained).abs() < 1e-6 * trained, "{t:?}");
}
