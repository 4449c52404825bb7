//! `fit` stopped and resumed on the GPU: the resumed run ends with the uninterrupted run's
//! weights (in the deterministic mode), and the helpers the CUDA-graph checks share with it;
//! the CUDA generator's state that checkpoints keep round-trips.
use std::path::Path;

use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::models::MnistNet;
use trainbook::train::Optimizer;

use crate::common;
use crate::common::gpu::gpu;

/// Copies run `from`'s checkpoint `step` into run `to`'s checkpoints, for `to` to resume from.
pub(crate) fn copy_step_checkpoint(from: &Path, to: &Path, step: &str) {
    common::copy_dir(&from.join("checkpoints").join(step), &to.join("checkpoints").join(step));
}

/// MNIST's CNN trained by `fit` for 2 epochs on `samples` random digits in batches of 8 (Adam,
/// a checkpoint every 4 steps) into `out`: resumed from there with `resume`, the step as a
/// CUDA graph with `graphs`.
pub(crate) fn mnist_fit(
    dist: &trainbook::dist::Dist,
    out: &Path,
    (samples, resume, graphs): (i64, bool, bool),
) {
    use trainbook::checkpoint::Policy;
    use trainbook::fit::{FitConfig, Trainer};
    tch::manual_seed(3);
    let x = Tensor::randn([samples, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [samples], (Kind::Int64, Device::Cpu));
    let ds = || TensorDataset::new(&x, &y, (0..10).map(|c| c.to_string()).collect()).unwrap();
    let (mut train, mut val) = (
        DataLoader::new(ds(), 8).shuffle(true).num_workers(0),
        DataLoader::new(ds(), 16).num_workers(0),
    );
    tch::manual_seed(if resume { 8 } else { 7 });
    let mut vs = VarStore::new(dist.device());
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::adam(&vs, 1e-3);
    let cfg = FitConfig {
        epochs: 2,
        out: out.to_path_buf(),
        policy: Policy { every_epochs: None, every_steps: Some(4), keep_last: 10, best: None },
        resume,
        progress: false,
        cuda_graphs: graphs,
        ..Default::default()
    };
    Trainer::with_config(dist, cfg).fit(&mut vs, &net, &mut opt, &mut train, &mut val).unwrap();
}

/// A run stopped mid-epoch and resumed on the GPU ends with the uninterrupted run's weights
/// (in the deterministic mode: deterministic algorithms, cuDNN deterministic without
/// benchmarking, cuBLAS's fixed workspace; the CUDA generator in the checkpoint).
#[test]
fn resume_on_the_gpu_is_exact() {
    let Some(_) = gpu("resume_on_the_gpu_is_exact") else { return };
    crate::run_probe("resume::fit_resume_probe");
}

#[test]
#[ignore = "run by resume_on_the_gpu_is_exact"]
fn fit_resume_probe() {
    use trainbook::dist::Dist;
    // Before any CUDA work: cuBLAS reads its workspace setting when it starts.
    trainbook::train::use_deterministic_algorithms(true).unwrap();
    let Some(device) = gpu("fit_resume_probe") else { return };
    let dist = Dist::single(device);
    let work = common::WorkDir::new("gpu-resume");
    let run = |out: &Path, resume: bool| mnist_fit(&dist, out, (48, resume, false));
    let (whole, resumed) = (work.join("whole"), work.join("resumed"));
    run(&whole, false);
    copy_step_checkpoint(&whole, &resumed, "step-000000004");
    run(&resumed, true);
    let (a, b) = (
        common::sorted_tensors(&whole.join("model.safetensors")),
        common::sorted_tensors(&resumed.join("model.safetensors")),
    );
    assert_eq!(
        common::max_abs_diff(&a, &b),
        0.0,
        "the resumed GPU run left the uninterrupted trajectory"
    );
}

/// The CUDA generator's state (what checkpoints keep per rank): restoring it replays the same
/// random numbers on the GPU; without a GPU, asking for it is an error that names the device.
#[test]
fn the_cuda_generator_state_round_trips() {
    use trainbook::dist::{rng_state, set_rng_state};
    if !tch::Cuda::is_available() {
        let err = rng_state(Device::Cuda(0)).unwrap_err().to_string();
        assert!(err.contains("Cuda(0)"), "{err}");
        common::skip("the GPU half of the_cuda_generator_state_round_trips", "no CUDA GPU");
        return;
    }
    let device = Device::Cuda(0);
    let state = rng_state(device).unwrap();
    let a = Tensor::rand([5], (Kind::Float, device));
    set_rng_state(device, &state).unwrap();
    let b = Tensor::rand([5], (Kind::Float, device));
    assert!(a.equal(&b), "the restored CUDA generator must replay the same numbers");
}
