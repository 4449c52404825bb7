//! Training speed, trainbook vs PyTorch in the same run (same libtorch, same threads):
//! - ResNet34 3-class train step (batch 16, 224px, fused Adam 1e-4, label smoothing 0.1) on one
//!   fixed batch, in img/s from the median step, in float32 and in bf16 autocast
//!   (`Precision::Bf16` vs `torch.autocast("cpu", dtype=torch.bfloat16)`): the step itself;
//! - the same in float32 through trainbook's `train_epoch`, each batch loaded from a
//!   `TensorDataset` (PyTorch: a `DataLoader` over a `TensorDataset`, 0 workers);
//! - one MNIST epoch (batch 64, Adam 1e-3, 0 loader workers), in seconds; and once more with
//!   per-step records on (what `fit`'s step logs read: 938 small steps, where a cost per
//!   step would show).
//!
//!     cargo bench --bench train_step
//!
//! Writes target/bench/train_step.json.
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::compose;
use trainbook::data::{DataLoader, Mnist, TensorDataset};
use trainbook::models::{resnet34, HeadKind, MnistNet};
use trainbook::train::{
    train_epoch, train_epoch_with, CrossEntropyLoss, EpochOptions, Optimizer, Precision,
    StepListener, StepLogging, StepRecord,
};
use trainbook::transforms::{Normalize, ToTensor};

const STEPS: usize = 8;

/// The middle value (the upper one of an even count).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> anyhow::Result<()> {
    let root = env!("CARGO_MANIFEST_DIR");
    let python =
        PathBuf::from(std::env::var("TRAINBOOK_VENV").unwrap_or_else(|_| format!("{root}/.venv")))
            .join("bin/python");
    let mnist_dir = PathBuf::from(root).join("data/mnist");
    if !mnist_dir.join("train-labels-idx1-ubyte").exists() {
        anyhow::ensure!(
            Command::new("python3")
                .arg(format!("{root}/data-scripts/mnist.py"))
                .arg(&mnist_dir)
                .status()?
                .success(),
            "could not build MNIST"
        );
    }
    tch::manual_seed(0);
    let opts = EpochOptions::on(Device::Cpu).quiet();

    // ResNet34 on one fixed batch, as PyTorch's side steps: the step itself (autocast region,
    // forward, loss, backward, fused Adam), float32 then bf16 autocast; the median of
    // STEPS steps after 2 warm-up steps.
    let vs = VarStore::new(Device::Cpu);
    let net = resnet34(&vs.root(), 3, HeadKind::Linear);
    let mut opt = Optimizer::adam(&vs, 1e-4);
    let loss_fn = CrossEntropyLoss::new().label_smoothing(0.1);
    let x = Tensor::randn([16, 3, 224, 224], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(3, [16], (Kind::Int64, Device::Cpu));
    let mut step_rate = |precision: Precision| -> anyhow::Result<f64> {
        let mut times = Vec::new();
        for i in 0..2 + STEPS {
            let start = Instant::now();
            opt.zero_grad();
            let loss = precision.run(Device::Cpu, || loss_fn.mean(&net.forward_t(&x, true), &y))?;
            loss.backward();
            opt.step()?;
            if i >= 2 {
                times.push(start.elapsed().as_secs_f64());
            }
        }
        Ok(16.0 / median(times))
    };
    let resnet_rate = step_rate(Precision::F32)?;
    let resnet_bf16_rate = step_rate(Precision::Bf16)?;

    // The same through train_epoch, each batch loaded from a TensorDataset in the step's thread
    // (PyTorch's side: a DataLoader over a TensorDataset, 0 workers); float32.
    let make = |batches: usize| -> anyhow::Result<DataLoader<TensorDataset>> {
        let n = 16 * batches as i64;
        let ds = TensorDataset::new(
            &Tensor::randn([n, 3, 224, 224], (Kind::Float, Device::Cpu)),
            &Tensor::randint(3, [n], (Kind::Int64, Device::Cpu)),
            vec!["C0".into(), "C2".into(), "C4".into()],
        )?;
        Ok(DataLoader::new(ds, 16).num_workers(0))
    };
    train_epoch(&net, &mut make(2)?, &mut opt, &loss_fn, &opts)?;
    let mut timed = make(STEPS)?;
    let start = Instant::now();
    train_epoch(&net, &mut timed, &mut opt, &loss_fn, &opts)?;
    let epoch_rate = (16 * STEPS) as f64 / start.elapsed().as_secs_f64();

    // MNIST: one epoch like PyTorch's example loop.
    let train = Mnist::new(&mnist_dir, true)?
        .with_transform(compose![ToTensor, Normalize::new(&[0.1307], &[0.3081])]);
    let samples = trainbook::data::Dataset::len(&train);
    let vs = VarStore::new(Device::Cpu);
    let net = MnistNet::new(&vs.root());
    let mut opt = Optimizer::adam(&vs, 1e-3);
    let mut loader = DataLoader::new(train, 64).shuffle(true).num_workers(0);
    let start = Instant::now();
    train_epoch(&net, &mut loader, &mut opt, &CrossEntropyLoss::new(), &opts)?;
    let mnist_s = start.elapsed().as_secs_f64();
    // The same epoch again with step records: they are read with the running sums and
    // handed over in bursts.
    let mut records = Records::default();
    let logged = EpochOptions::on(Device::Cpu)
        .quiet()
        .step_records(StepLogging { epoch: 1, steps_before: 0 });
    let start = Instant::now();
    train_epoch_with(&net, &mut loader, &mut opt, &CrossEntropyLoss::new(), &logged, &mut records)?;
    let mnist_logged_s = start.elapsed().as_secs_f64();
    anyhow::ensure!(records.0.len() == loader.len(), "a record per step");

    let out = Command::new(&python)
        .arg(format!("{root}/benches/pytorch_train_step.py"))
        .arg(&mnist_dir)
        .arg(STEPS.to_string())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "PyTorch side failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let torch: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let torch_rate = torch["resnet34_img_per_s"].as_f64().unwrap_or(f64::NAN);
    let torch_mnist = torch["mnist_epoch_s"].as_f64().unwrap_or(f64::NAN);
    let torch_bf16 = torch["resnet34_bf16_img_per_s"].as_f64().unwrap_or(f64::NAN);
    let torch_epoch = torch["resnet34_loader_img_per_s"].as_f64().unwrap_or(f64::NAN);
    println!("threads: trainbook {}, pytorch {}", tch::get_num_threads(), torch["threads"]);
    println!("resnet34 train step (batch 16, 224px): trainbook {resnet_rate:.2} img/s, pytorch {torch_rate:.2} img/s, ratio {:.2}x", resnet_rate / torch_rate);
    println!("resnet34 train step, bf16 autocast: trainbook {resnet_bf16_rate:.2} img/s, pytorch {torch_bf16:.2} img/s, ratio {:.2}x", resnet_bf16_rate / torch_bf16);
    println!("resnet34 steps with a loader (train_epoch / DataLoader): trainbook {epoch_rate:.2} img/s, pytorch {torch_epoch:.2} img/s, ratio {:.2}x", epoch_rate / torch_epoch);
    println!("mnist epoch ({samples} samples, batch 64): trainbook {mnist_s:.2} s, pytorch {torch_mnist:.2} s, speed ratio {:.2}x", torch_mnist / mnist_s);
    println!("mnist epoch with step records: trainbook {mnist_logged_s:.2} s, speed ratio to pytorch {:.2}x", torch_mnist / mnist_logged_s);
    let report = serde_json::json!({
        "resnet34": {"trainbook_img_per_s": resnet_rate, "pytorch_img_per_s": torch_rate, "ratio": resnet_rate / torch_rate},
        "resnet34_bf16": {"trainbook_img_per_s": resnet_bf16_rate, "pytorch_img_per_s": torch_bf16, "ratio": resnet_bf16_rate / torch_bf16},
        "resnet34_loader": {"trainbook_img_per_s": epoch_rate, "pytorch_img_per_s": torch_epoch, "ratio": epoch_rate / torch_epoch},
        "cpu_bf16_units": std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|c| c.contains("avx512_bf16")),
        "mnist_epoch": {"trainbook_s": mnist_s, "pytorch_s": torch_mnist, "speed_ratio": torch_mnist / mnist_s},
        "mnist_epoch_step_records": {"trainbook_s": mnist_logged_s, "pytorch_s": torch_mnist, "speed_ratio": torch_mnist / mnist_logged_s},
    });
    std::fs::create_dir_all(format!("{root}/target/bench"))?;
    std::fs::write(
        format!("{root}/target/bench/train_step.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(())
}

/// Keeps the step records an epoch hands over.
#[derive(Default)]
struct Records(Vec<StepRecord>);

impl StepListener for Records {
    fn on_steps_read(&mut self, steps: &[StepRecord]) -> trainbook::Result<()> {
        self.0.extend_from_slice(steps);
        Ok(())
    }
}
