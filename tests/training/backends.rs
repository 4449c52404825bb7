//! torch's speed switches (`trainbook::train::backends`): a fresh process has torch's defaults
//! (tests/oracle/backends.py reads them from PyTorch), the names round-trip, cuDNN's benchmark
//! is refused in the deterministic mode with an error naming both, and `fit` sets what it is
//! asked for while it runs and puts the switches back after.
use crate::common;

use std::process::Command;
use std::sync::{Arc, Mutex};

/// The switches are process-wide: this module's tests change them one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

use tch::nn::VarStore;
use tch::Device;
use trainbook::dist::Dist;
use trainbook::fit::{Callback, RunControl, Trainer};
use trainbook::models::MnistNet;
use trainbook::train::{
    cudnn_allow_tf32, determinism, float32_matmul_precision, set_cudnn_benchmark,
    set_float32_matmul_precision, set_tf32, use_deterministic_algorithms, Float32MatmulPrecision,
    Optimizer,
};

#[test]
fn a_fresh_process_has_torchs_defaults() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/backends.py");
    let out = Command::new(common::venv_bin("python")).arg(script).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let torch: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // This test binary's own process: each test puts back what it changes.
    assert_eq!(torch["cudnn_benchmark"], determinism().unwrap().cudnn_benchmark);
    assert_eq!(torch["cudnn_allow_tf32"], cudnn_allow_tf32().unwrap());
    assert_eq!(torch["float32_matmul_precision"], float32_matmul_precision().unwrap().name());
    assert_eq!(torch["matmul_allow_tf32_after_high"], true, "\"high\" is TF32 in torch");
}

#[test]
fn the_switches_round_trip_and_bad_names_are_errors() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for p in ["highest", "high", "medium"] {
        let p: Float32MatmulPrecision = p.parse().unwrap();
        set_float32_matmul_precision(p).unwrap();
        assert_eq!(float32_matmul_precision().unwrap(), p);
    }
    set_tf32(true).unwrap();
    assert_eq!(float32_matmul_precision().unwrap(), Float32MatmulPrecision::High);
    assert!(cudnn_allow_tf32().unwrap());
    set_tf32(false).unwrap();
    assert_eq!(float32_matmul_precision().unwrap(), Float32MatmulPrecision::Highest);
    assert!(!cudnn_allow_tf32().unwrap());
    set_tf32(false).unwrap();
    trainbook::train::set_cudnn_allow_tf32(true).unwrap(); // torch's default again
    let err = "fast".parse::<Float32MatmulPrecision>().unwrap_err().to_string();
    assert!(err.contains("'fast'") && err.contains("highest, high or medium"), "{err}");
}

/// Reads the float32 matmul precision at each validation's end.
struct SeesPrecision(Arc<Mutex<Vec<Float32MatmulPrecision>>>);

impl Callback for SeesPrecision {
    fn on_validation_end(&mut self, _run: &mut RunControl) -> trainbook::Result<()> {
        self.0.lock().unwrap().push(float32_matmul_precision()?);
        Ok(())
    }
}

#[test]
fn fit_sets_the_switches_for_the_run_and_puts_them_back() {
    let _turn = common::module_turn(module_path!());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let work = common::WorkDir::new("backends");
    let dist = Dist::single(Device::Cpu);
    let fit = |trainer: Trainer| {
        let mut vs = VarStore::new(Device::Cpu);
        let net = MnistNet::new(&vs.root());
        let mut opt = Optimizer::sgd(&vs, 0.01, 0.0);
        let (mut train, mut val) =
            (common::random_mnist_loader(1, 8), common::random_mnist_loader(2, 4));
        trainer.progress(false).fit(&mut vs, &net, &mut opt, &mut train, &mut val)
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    fit(Trainer::new(&dist)
        .out(work.join("high"))
        .float32_matmul_precision(Float32MatmulPrecision::High)
        .cudnn_benchmark(true)
        .callback(SeesPrecision(seen.clone())))
    .unwrap();
    assert_eq!(*seen.lock().unwrap(), [Float32MatmulPrecision::High]);
    assert_eq!(float32_matmul_precision().unwrap(), Float32MatmulPrecision::Highest);
    assert!(!determinism().unwrap().cudnn_benchmark, "back off after the run");

    // The deterministic mode needs cuDNN's benchmark off: asking for both is an error naming
    // both, before anything trains, and the switches stay as they were.
    use_deterministic_algorithms(true).unwrap();
    let err = fit(Trainer::new(&dist).out(work.join("both")).cudnn_benchmark(true));
    let still = determinism().unwrap();
    use_deterministic_algorithms(false).unwrap();
    let err = err.unwrap_err().to_string();
    assert!(err.contains("benchmark") && err.contains("deterministic mode"), "{err}");
    assert!(still.algorithms && !still.cudnn_benchmark);
    assert!(!work.join("both/metrics.jsonl").exists(), "nothing trained");
    assert!(set_cudnn_benchmark(false).is_ok());
}
