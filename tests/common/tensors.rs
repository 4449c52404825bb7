//! Tensors in the tests: the tensors of a safetensors file, two files' weights compared bit for
//! bit, PyTorch's side of a test read back, and the largest difference between tensors.
use std::path::Path;
use std::process::Command;

use tch::{Kind, Tensor};

use super::venv_bin;

/// The tensors of a safetensors file, sorted by name.
pub fn sorted_tensors(path: &Path) -> Vec<(String, Tensor)> {
    let mut t =
        trainbook::models::from_safetensors_bytes(&std::fs::read(path).unwrap(), path).unwrap();
    t.sort_by(|a, b| a.0.cmp(&b.0));
    t
}

/// The largest |a - b| over two name-sorted tensor lists (the names must match pairwise).
pub fn max_abs_diff(a: &[(String, Tensor)], b: &[(String, Tensor)]) -> f64 {
    a.iter()
        .zip(b)
        .map(|((na, ta), (nb, tb))| {
            assert_eq!(na, nb);
            (ta.to_kind(Kind::Double) - tb.to_kind(Kind::Double)).abs().max().double_value(&[])
        })
        .fold(0.0, f64::max)
}

/// Asserts that two safetensors files hold the same tensors bit for bit: the same names, and
/// for each the same dtype, shape and bytes. On a difference it names the first tensor (by
/// name) that differs and the largest |a - b| over all of them.
pub fn assert_same_weights(a: &Path, b: &Path, what: &str) {
    use safetensors::SafeTensors;
    let (bytes_a, bytes_b) = (std::fs::read(a).unwrap(), std::fs::read(b).unwrap());
    let ta = SafeTensors::deserialize(&bytes_a).unwrap();
    let tb = SafeTensors::deserialize(&bytes_b).unwrap();
    let (mut names, mut names_b) = (ta.names(), tb.names());
    names.sort_unstable();
    names_b.sort_unstable();
    assert!(!names.is_empty(), "{what}: {} holds no tensors", a.display());
    assert_eq!(names, names_b, "{what}: the two files hold different tensors");
    let differs = |name: &&&str| {
        let (x, y) = (ta.tensor(name).unwrap(), tb.tensor(name).unwrap());
        (x.dtype(), x.shape(), x.data()) != (y.dtype(), y.shape(), y.data())
    };
    if let Some(first) = names.iter().find(differs) {
        let max = max_abs_diff(&sorted_tensors(a), &sorted_tensors(b));
        panic!(
            "{what}: the weights are not bit for bit equal: first differing tensor {first}, \
             max |diff| over all tensors {max:e}"
        );
    }
    println!("{what}: {} tensors equal bit for bit", names.len());
}

/// Runs `tests/oracle/SCRIPT CMD DIR` with the venv's Python (PyTorch's side of a test) and
/// reads the `DIR/CMD.safetensors` it writes.
pub fn oracle_tensors(script: &str, cmd: &str, dir: &Path) -> Vec<(String, Tensor)> {
    let out = Command::new(venv_bin("python"))
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oracle").join(script))
        .args([cmd, dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{script} {cmd}: {}", String::from_utf8_lossy(&out.stderr));
    Tensor::read_safetensors(dir.join(format!("{cmd}.safetensors"))).unwrap()
}

/// The tensors of `ts` whose names start with `prefix`, with the prefix removed.
pub fn with_prefix(ts: &[(String, Tensor)], prefix: &str) -> Vec<(String, Tensor)> {
    ts.iter()
        .filter_map(|(n, t)| n.strip_prefix(prefix).map(|k| (k.to_string(), t.shallow_clone())))
        .collect()
}

/// The tensor called `name` in `ts`.
pub fn get<'a>(ts: &'a [(String, Tensor)], name: &str) -> &'a Tensor {
    &ts.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("{name} missing")).1
}

/// What a trial run (the range test, the batch-size finder) must put back: copies of the
/// model's variables (`w.<name>`) and the optimizer's state tensors (`o.<name>`), by name.
pub fn training_state(
    vs: &tch::nn::VarStore,
    opt: &trainbook::train::Optimizer,
) -> Vec<(String, Tensor)> {
    let mut all: Vec<(String, Tensor)> =
        vs.variables().into_iter().map(|(n, t)| (format!("w.{n}"), t.copy())).collect();
    all.extend(opt.state_dict().0.into_iter().map(|(n, t)| (format!("o.{n}"), t.copy())));
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// Largest absolute difference of two tensors on any devices.
pub fn max_abs(a: &Tensor, b: &Tensor) -> f64 {
    let cpu = tch::Device::Cpu;
    (a.to_device(cpu) - b.to_device(cpu)).abs().max().double_value(&[])
}
