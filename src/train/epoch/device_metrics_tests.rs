//! Tests of `device_metrics.rs`: the sums against the host's, the reads counted, weighted sums,
//! step records and the own training metrics read with the sums.
use super::*;
use crate::train::host_reads;

/// The tests that read the device take turns: two of them count the reads.
static READS: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    READS.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[test]
fn sums_match_the_host_metrics_and_reads_are_counted() {
    let _turn = turn();
    let logits = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0, 2.0, 0.0]).view([3, 2]);
    let labels = Tensor::from_slice(&[0i64, 0, 0]);
    let mean = Tensor::from(0.7f32);
    let start = RunningMetrics { loss_sum: 1.25, correct: 4, count: 5, ..Default::default() };
    let mut host = start.clone();
    host.add_batch(f64::from(0.7f32) * 3.0, &logits, &labels);
    let mut dev = DeviceMetrics::new(Device::Cpu, start.clone());
    dev.add_mean_loss(&mean, &logits, &labels);
    let before = host_reads();
    assert_eq!(dev.read(), host);
    assert_eq!(host_reads(), before + 1);
}

#[test]
fn weighted_sums_continue_a_resumed_epochs_weights() {
    let _turn = turn();
    let logits = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0]).view([2, 2]);
    let labels = Tensor::from_slice(&[0i64, 1]);
    let weights = Tensor::from_slice(&[0.5f64, 2.0]);
    let start =
        RunningMetrics { loss_sum: 1.25, loss_weight: Some(3.0), count: 5, ..Default::default() };
    let mut dev = DeviceMetrics::new(Device::Cpu, start).with_step_records();
    dev.add_mean_loss_weighted(&Tensor::from(0.75f32), &logits, &labels, Some(&weights));
    dev.end_step(1, 0, 1, 0.1, None);
    dev.add_loss_sum_weighted(&Tensor::from(1.0f64), &logits, &labels, Some(&weights));
    let m = dev.read();
    assert_eq!((m.loss_sum, m.loss_weight, m.count), (1.25 + 0.75 * 2.5 + 1.0, Some(8.0), 9));
    assert_eq!(m.loss(), (1.25 + 0.75 * 2.5 + 1.0) / 8.0);
    assert_eq!(dev.take_steps()[0].loss, 0.75, "the step's weighted mean");
    // Without weights nothing of them is kept.
    let plain = DeviceMetrics::new(Device::Cpu, RunningMetrics::default());
    assert_eq!(plain.read().loss_weight, None);
}

#[test]
fn step_records_come_back_with_the_sums_in_the_same_read() {
    let _turn = turn();
    let logits = Tensor::from_slice(&[1.0f32, 0.0, 0.0, 1.0]).view([2, 2]);
    let labels = Tensor::from_slice(&[0i64, 0]);
    let start = RunningMetrics { loss_sum: 1.25, correct: 4, count: 5, ..Default::default() };
    let mut plain = DeviceMetrics::new(Device::Cpu, start.clone());
    let mut dev = DeviceMetrics::new(Device::Cpu, start).with_step_records();
    for (i, mean) in [0.75f32, 0.5].into_iter().enumerate() {
        dev.add_mean_loss(&Tensor::from(mean), &logits, &labels);
        plain.add_mean_loss(&Tensor::from(mean), &logits, &labels);
        dev.end_step(10 + i as u64, 2, i + 1, 0.1, None);
    }
    let before = host_reads();
    assert_eq!(dev.read(), plain.read(), "the sums are the same, bit for bit");
    assert_eq!(host_reads(), before + 2, "one read each");
    let steps = dev.take_steps();
    let losses: Vec<f64> = steps.iter().map(|s| s.loss).collect();
    assert_eq!(losses, [0.75, 0.5]);
    assert_eq!(steps.iter().map(|s| s.step).collect::<Vec<_>>(), [10, 11]);
    assert!(dev.take_steps().is_empty() && plain.take_steps().is_empty());
}

/// A metric of one's own for these tests: the sum of the first logit, and the count.
struct FirstLogit;

impl crate::train::Metric for FirstLogit {
    fn name(&self) -> &str {
        "first"
    }
    fn mode(&self) -> crate::train::Mode {
        crate::train::Mode::Max
    }
    fn sums_len(&self) -> usize {
        2
    }
    fn batch_sums(&self, output: &Tensor, target: &Tensor) -> Tensor {
        let n = Tensor::from(target.size()[0] as f64);
        Tensor::stack(&[output.select(1, 0).sum(Kind::Double), n], 0)
    }
    fn compute(&self, sums: &[f64]) -> f64 {
        sums[0] / sums[1]
    }
}

#[test]
fn own_training_metrics_continue_their_sums_and_give_each_step_its_value() {
    let _turn = turn();
    let metrics: Vec<SharedMetric> = vec![std::sync::Arc::new(FirstLogit)];
    let logits = Tensor::from_slice(&[1.0f32, 0.0, 3.0, 1.0]).view([2, 2]);
    let labels = Tensor::from_slice(&[0i64, 1]);
    let start = RunningMetrics { count: 5, own_sums: vec![2.5, 5.0], ..Default::default() };
    let mut dev = DeviceMetrics::new(Device::Cpu, start.clone()).with_step_records();
    dev = dev.with_own_metrics(&metrics, &start, Device::Cpu).unwrap();
    for (i, mean) in [0.75f32, 0.5].into_iter().enumerate() {
        dev.add_mean_loss(&Tensor::from(mean), &logits, &labels);
        dev.add_own(&logits, &labels).unwrap();
        dev.end_step(1 + i as u64, 0, i + 1, 0.1, None);
    }
    let before = host_reads();
    let m = dev.read();
    assert_eq!(host_reads(), before + 1, "the own sums come in the same read");
    assert_eq!((m.own_sums, m.count), (vec![2.5 + 4.0 + 4.0, 5.0 + 2.0 + 2.0], 9));
    let steps = dev.take_steps();
    assert_eq!(steps.len(), 2);
    for s in &steps {
        assert_eq!(s.metrics, [("first".to_string(), 2.0)], "this step's samples only");
    }
    // An epoch with samples but other sums (a checkpoint written with other metrics) is an
    // error; one without samples starts from zero.
    let other = RunningMetrics { count: 5, own_sums: vec![1.0], ..Default::default() };
    let dev = DeviceMetrics::new(Device::Cpu, other.clone());
    let err = dev.with_own_metrics(&metrics, &other, Device::Cpu).err().unwrap();
    assert!(err.to_string().contains("holds 1 sums of training metrics"), "{err}");
    let fresh = DeviceMetrics::new(Device::Cpu, RunningMetrics::default());
    let fresh = fresh.with_own_metrics(&metrics, &RunningMetrics::default(), Device::Cpu);
    assert_eq!(fresh.unwrap().read().own_sums, [0.0, 0.0]);
}

#[test]
fn the_training_loop_reads_the_device_only_through_device_metrics() {
    // A read hidden elsewhere in the loop would escape the count that tests rely on.
    for (name, source) in [("epoch/mod.rs", include_str!("mod.rs"))] {
        for token in ["double_value", "int64_value", "f64_value", "Vec::try_from", ".item("] {
            assert!(
                !source.contains(token),
                "{name} reads the device with {token}; go through DeviceMetrics::read"
            );
        }
    }
}
