//! Tests of the `Trainer` builder: pinned batches by default on CUDA, none of it on the CPU.
use super::*;

#[test]
fn pin_memory_is_on_by_default_and_sends_cpu_loaders_to_the_gpu() {
    let dist = Dist::single(Device::Cpu);
    assert!(Trainer::new(&dist).config().pin_memory, "torch's pin_memory=True by default");
    assert!(!Trainer::new(&dist).pin_memory(false).config().pin_memory);
    let (cpu, gpu0, gpu1) = (Device::Cpu, Device::Cuda(0), Device::Cuda(1));
    assert_eq!(batch_device(gpu1, true, cpu), gpu1, "a CPU loader feeds the run's GPU");
    assert_eq!(batch_device(gpu1, false, cpu), cpu, "switched off: as configured");
    assert_eq!(batch_device(cpu, true, cpu), cpu, "a CPU run: unchanged");
    assert_eq!(batch_device(gpu1, true, gpu0), gpu0, "a loader's own device is kept");
}

#[test]
fn on_the_cpu_pin_memory_changes_nothing() {
    use crate::data::{DataLoader, TensorDataset};
    use crate::train::Optimizer;
    use tch::nn::VarStore;
    use tch::nn::{linear, seq_t, Path, SequentialT};
    use tch::{Kind, Tensor};
    // No dropout and no shuffle: the runs draw nothing from the CPU generator, which other
    // tests of this binary use at the same time.
    let model = |p: &Path| {
        seq_t().add_fn(|x| x.flatten(1, -1)).add(linear(p / "fc", 16, 10, Default::default()))
    };
    let init = VarStore::new(Device::Cpu);
    let _ = model(&init.root());
    let dist = Dist::single(Device::Cpu);
    let x = Tensor::arange(8 * 16, (Kind::Float, Device::Cpu)).view([8, 1, 4, 4]) / 100.0;
    let y = Tensor::arange(8, (Kind::Int64, Device::Cpu));
    let classes: Vec<String> = (0..10).map(|c| c.to_string()).collect();
    let weights = |pin: bool| {
        let out = tempfile::tempdir().unwrap();
        let data = || TensorDataset::new(&x, &y, classes.clone()).unwrap();
        let mut train = DataLoader::new(data(), 4).num_workers(0);
        let mut val = DataLoader::new(data(), 4).num_workers(0);
        let mut vs = VarStore::new(Device::Cpu);
        let net: SequentialT = model(&vs.root());
        vs.copy(&init).unwrap();
        let mut opt = Optimizer::sgd(&vs, 0.01, 0.9);
        Trainer::new(&dist)
            .out(out.path())
            .resume(false)
            .progress(false)
            .checkpoint_every_epochs(0)
            .pin_memory(pin)
            .fit(&mut vs, &net, &mut opt, &mut train, &mut val)
            .unwrap();
        assert_eq!((train.batch_device(), val.batch_device()), (Device::Cpu, Device::Cpu));
        vs.variables()["fc.weight"].copy()
    };
    let (on, off) = (weights(true), weights(false));
    assert!(on.equal(&off) && !on.equal(&init.variables()["fc.weight"]));
}
