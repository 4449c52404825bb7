//! `Trainer::test`: after a run, testing the final weights on the validation loader gives the
//! run's last validation exactly (same weights, same evaluation); on 2 ranks the shards add up
//! to the same sample count and correct count; the loader gets its limit and device back.
use crate::common;

use std::sync::Mutex;

use tch::nn::VarStore;
use tch::Device;
use trainbook::dist::Dist;
use trainbook::fit::Trainer;
use trainbook::launch::spawn;
use trainbook::models::MnistNet;
use trainbook::train::Optimizer;

/// libtorch's random generator is shared by the test threads: one run at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn testing_the_final_weights_gives_the_last_validation_exactly() {
    let _turn = common::module_turn(module_path!());
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("test-stage");
    let dist = Dist::single(Device::Cpu);
    let (mut train, mut val) =
        (common::random_mnist_loader(1, 24), common::random_mnist_loader(2, 14));
    tch::manual_seed(3);
    let mut vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::sgd(&vs, 0.01, 0.9);
    let trainer = Trainer::new(&dist).epochs(2).out(work.join("run")).progress(false);
    let report = trainer.fit(&mut vs, &net, &mut opt, &mut train, &mut val).unwrap();
    let last = report.history.last().unwrap();
    let t = trainer.test(&mut vs, &net, &mut val).unwrap();
    assert_eq!(t.samples, 14);
    assert_eq!(t.loss.to_bits(), last.val_loss.unwrap().to_bits(), "{t} vs {last:?}");
    assert_eq!(t.accuracy.to_bits(), last.val_acc.unwrap().to_bits());
    // The run's validation limit holds for the test, and the loader gets its own back.
    let limited = Trainer::new(&dist).progress(false).limit_batches(None, Some(2));
    assert_eq!(limited.test(&mut vs, &net, &mut val).unwrap().samples, 8);
    assert_eq!((val.len(), val.batch_limit()), (4, None));

    // Two ranks, each testing its shard of the same weights: the counts add up exactly.
    let saved = work.join("weights.safetensors");
    trainbook::models::save_safetensors(&vs, &saved).unwrap();
    let ranks = spawn(2, |dist| {
        let mut vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        trainbook::models::load_weights(&mut vs, &saved, true)?;
        let mut loader = common::random_mnist_loader(2, 14).distributed(dist);
        let r = Trainer::new(dist).progress(false).test(&mut vs, &net, &mut loader)?;
        Ok((r.samples, r.accuracy, r.loss))
    })
    .unwrap();
    for &(samples, accuracy, loss) in &ranks {
        assert_eq!(samples, 14, "every rank reports the whole set's count");
        assert_eq!(accuracy.to_bits(), t.accuracy.to_bits(), "the correct counts add up");
        // Float64 sums of the same float32 losses in another grouping: a few ulps at most.
        assert!((loss - t.loss).abs() <= 1e-12 * t.loss.abs(), "{loss} vs {}", t.loss);
    }
}
