//! The GPU suite: CUDA training against PyTorch on the same GPU. It runs wherever a CUDA GPU
//! and a PyTorch installation exist (`make gpu-test`) and says SKIPPED on any other machine,
//! where every test passes without checking anything GPU-specific (`make test` runs it so the
//! suite always compiles). With `--features cuda` it adds NCCL: a group of one on one GPU, two
//! ranks with two GPUs (2 ranks sharing one GPU use Gloo with CUDA tensors, without the feature
//! too), and a check that the build loaded libtorch_cuda (which `tests/cuda_feature.rs` runs on
//! any machine). The two-rank checks on one GPU (Gloo with CUDA tensors) are in
//! tests/gpu_ranks.rs.
//!
//! Environment: `TRAINBOOK_PYTHON` (a python with torch; default: the project's venv, else
//! `python3`), `TRAINBOOK_REPO` (where `tests/oracle` is; default: this checkout).
mod common;
#[path = "gpu_parts/cuda_graphs.rs"]
mod cuda_graphs;
#[path = "gpu_parts/resume.rs"]
mod resume;
#[path = "gpu_parts/torchscript.rs"]
mod torchscript;

use std::process::Command;
use std::time::Instant;

use common::gpu::{gpu, oracle};
use common::{get, max_abs};
use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::models::{
    load_state_dict, resnet34, resnet34_classifier, to_channels_last, HeadKind, MnistNet,
};
use trainbook::train::{train_epoch, CrossEntropyLoss, EpochOptions, Optimizer, Precision};

/// Three SGD steps of the MNIST CNN and the course ResNet34 on the GPU, trainbook against
/// PyTorch (tests/oracle/amp.py on cuda), in float32 and in bf16 autocast. Both sides run in
/// the deterministic mode (in a child process, as it is set before CUDA starts): the course
/// ResNet on 4 pictures of 32 px normalises 1x1 maps over 4 values in its last blocks, which
/// turns the last-bit differences of cuDNN's atomics into visible ones within 2 steps (seen
/// on an H100: step 2 agreed to 1e-3, step 3 differed by 37%).
#[test]
fn cuda_train_steps_match_pytorch_in_f32_and_bf16() {
    let Some(_) = gpu("cuda_train_steps_match_pytorch_in_f32_and_bf16") else { return };
    run_probe("cuda_steps_probe");
}

/// Runs the ignored test `probe` of this binary in a child process and fails with its output.
fn run_probe(probe: &str) {
    match probe_outcome(probe) {
        Ok(stdout) => println!("{stdout}"),
        Err(why) => panic!("{why}"),
    }
}

/// The output of the ignored test `probe` run in a child process; an error when it failed or
/// did not run exactly one test (a renamed probe would otherwise pass having checked nothing).
fn probe_outcome(probe: &str) -> Result<String, String> {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", probe, "--ignored", "--nocapture", "--test-threads=1"])
        .output()
        .unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        return Err(format!("{probe} failed:\n{stdout}\n{stderr}"));
    }
    if !stdout.contains("test result: ok. 1 passed") {
        return Err(format!("{probe} ran no test (renamed?):\n{stdout}\n{stderr}"));
    }
    Ok(stdout.into_owned())
}

/// A probe name that matches no test fails `run_probe` instead of passing (on any machine).
#[test]
fn a_probe_that_runs_no_test_is_a_failure() {
    let why = probe_outcome("no_such_probe").unwrap_err();
    assert!(why.contains("no_such_probe ran no test"), "{why}");
}

#[test]
#[ignore = "run by cuda_train_steps_match_pytorch_in_f32_and_bf16"]
fn cuda_steps_probe() {
    // Before any CUDA work: cuBLAS reads its workspace setting when it starts.
    trainbook::train::use_deterministic_algorithms(true).unwrap();
    let Some(device) = gpu("cuda_steps_probe") else { return };
    for (precision, dtype) in [(Precision::F32, "float32"), (Precision::Bf16, "bfloat16")] {
        let dir = common::WorkDir::new(&format!("gpu-steps-{dtype}"));
        oracle("amp.py", &["bf16", dir.to_str().unwrap(), "cuda", dtype, "deterministic"]);
        let ts = Tensor::read_safetensors(dir.join("bf16.safetensors")).unwrap();
        for name in ["mnist", "resnet"] {
            let mut vs = VarStore::new(device);
            let (net, train): (Box<dyn ModuleT>, bool) = if name == "mnist" {
                (Box::new(MnistNet::new(&vs.root())), false)
            } else {
                (Box::new(resnet34_classifier(&vs.root(), 3)), true)
            };
            let init: Vec<(String, Tensor)> = ts
                .iter()
                .filter_map(|(n, t)| {
                    n.strip_prefix(&format!("{name}.init."))
                        .map(|k| (k.to_string(), t.to_device(device)))
                })
                .collect();
            load_state_dict(&mut vs, &init, true).unwrap();
            let mut opt = Optimizer::sgd(&vs, 0.05, 0.9);
            let (x, y) = (
                get(&ts, &format!("{name}.x")).to_device(device),
                get(&ts, &format!("{name}.y")).to_device(device),
            );
            let loss_fn = CrossEntropyLoss::new().label_smoothing(0.1);
            let mut losses = Vec::new();
            for _ in 0..3 {
                opt.zero_grad();
                let loss =
                    precision.run(device, || loss_fn.mean(&net.forward_t(&x, train), &y)).unwrap();
                loss.backward();
                opt.step().unwrap();
                losses.push(loss.double_value(&[]));
            }
            // cuDNN may pick different algorithms in two processes (different summation
            // orders): in float32 a loss agrees to about 1e-5 of itself; in bf16 one flipped
            // rounding (2^-8) may show. Weights: the same shares of the distance they moved.
            let tol = if precision == Precision::F32 { 1e-4 } else { 1.0 / 128.0 };
            let want: Vec<f64> = Vec::try_from(get(&ts, &format!("{name}.losses"))).unwrap();
            println!("{dtype} {name}: losses {losses:?}, PyTorch {want:?}");
            for (a, b) in losses.iter().zip(&want) {
                assert!((a - b).abs() <= tol * b.abs(), "{dtype} {name}: loss {a} vs PyTorch {b}");
            }
            for (pname, p) in vs.variables() {
                let (start, fin) = (
                    get(&ts, &format!("{name}.init.{pname}")),
                    get(&ts, &format!("{name}.final.{pname}")),
                );
                if p.kind() == Kind::Float {
                    let diff = max_abs(&p, fin);
                    assert!(
                        diff <= tol * max_abs(fin, start) + 1e-6,
                        "{dtype} {name} {pname}: {diff:e} from PyTorch"
                    );
                }
            }
        }
    }
}

/// The loader hands over batches on the GPU (staged in pinned memory, copied without
/// blocking), equal to the CPU batches.
#[test]
fn the_loader_delivers_batches_on_the_gpu() {
    let Some(device) = gpu("the_loader_delivers_batches_on_the_gpu") else { return };
    let x = Tensor::randn([20, 3, 8, 8], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(3, [20], (Kind::Int64, Device::Cpu));
    let ds = || TensorDataset::new(&x, &y, vec!["a".into(), "b".into(), "c".into()]).unwrap();
    let (mut cpu, mut cuda) = (
        DataLoader::new(ds(), 8).num_workers(0),
        DataLoader::new(ds(), 8).num_workers(2).device(device),
    );
    let mut n = 0;
    for (a, b) in cpu.iter().zip(cuda.iter()) {
        let (a, b) = (a.unwrap(), b.unwrap());
        assert_eq!((b.images.device(), b.labels.device()), (device, device));
        assert_eq!(max_abs(&a.images, &b.images), 0.0);
        assert!(a.labels.equal(&b.labels.to_device(Device::Cpu)));
        n += 1;
    }
    assert_eq!(n, 3);
}

/// `Dist::init` makes the rank's GPU the thread's current CUDA device before any CUDA work
/// (`torch.cuda.set_device(local_rank)`), on whichever thread it runs.
#[test]
fn dist_init_makes_the_ranks_gpu_current() {
    let Some(_) = gpu("dist_init_makes_the_ranks_gpu_current") else { return };
    use trainbook::dist::{current_cuda_device, Dist, DistOptions};
    let (device, current) = std::thread::spawn(|| {
        let opts = DistOptions { device: Some(Device::Cuda(0)), ..Default::default() };
        let dist = Dist::init_with(opts).unwrap();
        (dist.device(), current_cuda_device().unwrap())
    })
    .join()
    .unwrap();
    assert_eq!(device, Device::Cuda(current), "the rank's device is the thread's current one");
}

/// Two NCCL ranks (threads of this process on GPUs 0 and 1): each rank's current device is its
/// own GPU, its group is bound to it (`init_process_group(device_id=...)`), and all-reduce and
/// barrier run there.
#[cfg(feature = "cuda")]
#[test]
fn nccl_ranks_set_and_bind_their_own_gpus() {
    use trainbook::dist::current_cuda_device;
    use trainbook::launch::{spawn_with, SpawnOptions};
    let test = "nccl_ranks_set_and_bind_their_own_gpus";
    let Some(_) = gpu(test) else { return };
    if tch::Cuda::device_count() < 2 {
        common::skip(test, "NCCL needs a GPU per rank, and 1 is visible");
        return;
    }
    let opts = SpawnOptions { device: Some(Device::Cuda(0)), ..Default::default() };
    let ranks = spawn_with(2, opts, |dist| {
        let device = dist.device();
        let current = current_cuda_device()?;
        let bound = dist.process_group().and_then(|pg| pg.bound_device());
        let t = Tensor::from_slice(&[(dist.rank() + 1) as f32]).to_device(device);
        dist.all_reduce_sum(&t)?;
        dist.barrier()?;
        let sum = Vec::<f32>::try_from(t.to_device(Device::Cpu))?;
        Ok((format!("{device:?} {:?} {bound:?}", dist.backend()), current, sum))
    })
    .unwrap();
    for (rank, (devices, current, sum)) in ranks.into_iter().enumerate() {
        assert_eq!(devices, format!("Cuda({rank}) Some(Nccl) Some(Cuda({rank}))"));
        assert_eq!(current, rank, "rank {rank}'s current CUDA device");
        assert_eq!(sum, [3.0]);
    }
}

/// `Dist::manual_seed` on a GPU seeds that GPU's generator (and the CPU's) and no other GPU's,
/// unlike `tch::manual_seed`: torch.cuda.manual_seed's stream on the rank's device.
#[test]
fn a_rank_seeds_its_own_gpu_only() {
    use trainbook::dist::{rng_state, Dist};
    let Some(device) = gpu("a_rank_seeds_its_own_gpu_only") else { return };
    let dist = Dist::single(device);
    let draw = || Vec::<f32>::try_from(Tensor::rand([4], (Kind::Float, device))).unwrap();
    tch::manual_seed(5);
    let want = draw();
    tch::manual_seed(6);
    let other = (tch::Cuda::device_count() > 1).then(|| rng_state(Device::Cuda(1)).unwrap());
    dist.manual_seed(5).unwrap();
    assert_eq!(draw(), want, "the rank's GPU follows the seed");
    match other {
        Some(other) => {
            assert_eq!(rng_state(Device::Cuda(1)).unwrap(), other, "GPU 1's generator untouched")
        }
        None => common::skip(
            "a_rank_seeds_its_own_gpu_only (another GPU's generator left alone)",
            "one GPU on this machine: that half needs a second GPU",
        ),
    }
}

/// Two thread ranks sharing one GPU (`share_gpus`: Gloo with CUDA tensors) take turns on its
/// generator: each rank's draws, interleaved with collectives, are exactly the stream its own
/// seed gives a process of its own, and all-reduce sums the CUDA tensors.
#[test]
fn thread_ranks_sharing_a_gpu_take_turns_on_its_generator() {
    use trainbook::launch::{spawn_with, SpawnOptions};
    let Some(device) = gpu("thread_ranks_sharing_a_gpu_take_turns_on_its_generator") else {
        return;
    };
    let draw = || Vec::<f32>::try_from(Tensor::rand([3], (Kind::Float, device))).unwrap();
    let alone: Vec<Vec<f32>> = (0..2)
        .map(|seed| {
            tch::manual_seed(seed);
            [draw(), draw(), draw()].concat()
        })
        .collect();
    let opts = SpawnOptions { device: Some(device), share_gpus: true, ..Default::default() };
    let ranks = spawn_with(2, opts, |dist| {
        assert_eq!(dist.device(), device);
        dist.manual_seed(dist.rank() as i64)?;
        let mut draws = draw();
        let t = Tensor::from_slice(&[(dist.rank() + 1) as f32]).to_device(device);
        dist.all_reduce_sum(&t)?; // the other rank draws meanwhile
        draws.extend(draw());
        dist.barrier()?;
        draws.extend(draw());
        let sum = Vec::<f32>::try_from(t.to_device(Device::Cpu))?;
        Ok((format!("{:?}", dist.backend()), sum, draws))
    })
    .unwrap();
    for (rank, (backend, sum, draws)) in ranks.into_iter().enumerate() {
        assert_eq!((backend.as_str(), sum), ("Some(Gloo)", vec![3.0]), "rank {rank}");
        assert_eq!(draws, alone[rank], "rank {rank}'s stream on the shared GPU");
    }
}

/// GradScaler with SGD on the GPU in float16: the inf flag stays on the device
/// (tests/training/amp.rs counts the reads on the CPU, the same control flow); a step with an inf
/// gradient leaves parameters and momentum as they were, a finite one equals the plain SGD step
/// bit for bit.
#[test]
fn grad_scaler_skips_sgd_steps_on_the_gpu() {
    use trainbook::train::{GradScaler, GradScalerConfig, OptimizerKind};
    let Some(device) = gpu("grad_scaler_skips_sgd_steps_on_the_gpu") else { return };
    let (a, mut b) = (VarStore::new(device), VarStore::new(device));
    let (net_a, net_b) = (MnistNet::new(&a.root()), MnistNet::new(&b.root()));
    b.copy(&a).unwrap();
    let kind =
        OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, nesterov: false, weight_decay: 0.0 };
    let (mut opt_a, mut opt_b) = (Optimizer::new(&a, kind, 0.05), Optimizer::new(&b, kind, 0.05));
    let config = GradScalerConfig { init_scale: 256.0, ..Default::default() };
    let mut scaler = GradScaler::with_config(device, config);
    for step in 0..4 {
        let x = Tensor::randn([8, 1, 28, 28], (Kind::Float, device));
        let y = Tensor::randint(10, [8], (Kind::Int64, device));
        opt_a.zero_grad();
        opt_b.zero_grad();
        let loss = Precision::F16
            .run(device, || CrossEntropyLoss::new().mean(&net_a.forward_t(&x, false), &y))
            .unwrap();
        scaler.scale(&loss).backward();
        net_b.forward_t(&x, false).sum(Kind::Float).backward();
        let skipped = step == 2;
        if skipped {
            let _ = a.variables()["fc2.bias"].grad().get(0).fill_(f64::NAN);
        }
        let found_inf = scaler.step(&mut opt_a).unwrap();
        if !skipped {
            for (name, p) in a.variables() {
                b.variables()[&name].grad().copy_(&p.grad());
            }
            opt_b.step().unwrap();
        }
        assert_eq!(found_inf.double_value(&[]), if skipped { 1.0 } else { 0.0 });
        for (name, p) in a.variables() {
            assert!(p.equal(&b.variables()[&name]), "step {step}: {name}");
        }
        let ((ta, ma), (tb, mb)) = (opt_a.state_dict(), opt_b.state_dict());
        assert_eq!(ma.steps, mb.steps, "step {step}");
        assert!(ta.iter().zip(&tb).all(|((_, x), (_, y))| x.equal(y)), "step {step}: momentum");
    }
}

/// A real NCCL group of one (the most one GPU allows: NCCL refuses two ranks on one device;
/// `nccl_ranks_set_and_bind_their_own_gpus` needs two GPUs), bound to its GPU as
/// `init_process_group(device_id=...)` binds it: its communicator is created on that device,
/// and all-reduce and barrier run there.
#[cfg(feature = "cuda")]
#[test]
fn an_nccl_group_of_one_is_bound_to_its_gpu() {
    use std::time::Duration;
    use trainbook::dist::{Backend, ProcessGroup, Store};
    let Some(device) = gpu("an_nccl_group_of_one_is_bound_to_its_gpu") else { return };
    let timeout = Duration::from_secs(60);
    let store = Store::tcp("127.0.0.1", common::free_port(), true, Some(1), timeout).unwrap();
    let pg = ProcessGroup::on_device(store, Backend::Nccl, 0, 1, timeout, device).unwrap();
    assert_eq!((pg.backend(), pg.bound_device()), (Backend::Nccl, Some(device)));
    let t = Tensor::from_slice(&[1.5f32, -2.0]).to_device(device);
    pg.all_reduce_sum(&t).unwrap();
    pg.barrier().unwrap();
    assert_eq!(Vec::<f32>::try_from(t.to_device(Device::Cpu)).unwrap(), [1.5, -2.0]);
}

/// The `cuda` build links libtorch_cuda and loads it (which registers CUDA with libtorch), with
/// NCCL built into the shim; on any machine, GPU or not (`tests/cuda_feature.rs` runs it).
#[cfg(feature = "cuda")]
#[test]
fn the_cuda_build_loads_libtorch_cuda() {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    assert!(maps.contains("libtorch_cuda.so"), "libtorch_cuda.so is not mapped in this process");
    assert!(trainbook::versions().nccl_built_in);
    assert!(trainbook::dist::Backend::Nccl.is_available());
}

/// ResNet34 at 224 px, batch 64, bf16 + channels_last on both sides: img/s of trainbook's
/// train_epoch and of PyTorch's loop on this GPU (printed; timing goals live in benchmarks).
#[test]
fn resnet34_throughput_against_pytorch() {
    let Some(device) = gpu("resnet34_throughput_against_pytorch") else { return };
    tch::Cuda::cudnn_set_benchmark(true);
    let (batch, steps) = (64i64, 20usize);
    let vs = VarStore::new(device);
    let net = resnet34(&vs.root(), 3, HeadKind::Linear);
    to_channels_last(&vs);
    let mut opt = Optimizer::sgd(&vs, 0.01, 0.9);
    let data = |batches: i64| {
        let n = batch * batches;
        let ds = TensorDataset::new(
            &Tensor::randn([n, 3, 224, 224], (Kind::Float, Device::Cpu)),
            &Tensor::randint(3, [n], (Kind::Int64, Device::Cpu)),
            vec!["C0".into(), "C2".into(), "C4".into()],
        )
        .unwrap();
        DataLoader::new(ds, batch as usize).num_workers(2).device(device)
    };
    let opts = EpochOptions::on(device).quiet().precision(Precision::Bf16).channels_last(true);
    train_epoch(&net, &mut data(5), &mut opt, &CrossEntropyLoss::new(), &opts).unwrap(); // warm-up
    tch::Cuda::synchronize(0);
    let mut timed = data(steps as i64);
    let start = Instant::now();
    let t = train_epoch(&net, &mut timed, &mut opt, &CrossEntropyLoss::new(), &opts).unwrap();
    tch::Cuda::synchronize(0);
    let ours = t.samples as f64 / start.elapsed().as_secs_f64();
    let theirs: f64 =
        oracle("gpu_bench.py", &[&batch.to_string(), &steps.to_string()]).trim().parse().unwrap();
    println!("ResNet34 224px batch {batch}, bf16 + channels_last, {} GPU(s): trainbook {ours:.0} img/s, PyTorch {theirs:.0} img/s, ratio {:.2}x", tch::Cuda::device_count(), ours / theirs);
    assert!(ours > 0.0 && theirs > 0.0);
}
