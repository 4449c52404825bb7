//! Stochastic weight averaging against `torch.optim.swa_utils` (tests/oracle/swa.py): a CNN
//! with BatchNorm takes the three states PyTorch's model went through; `SwaModel` averages them
//! to `AveragedModel`'s parameters and buffers bit for bit (CPU: torch's `a + (m - a) / (n + 1)`),
//! with its `state_dict` names; `update_bn` over the same 20 pictures in batches of 5 gives
//! `update_bn`'s running statistics bit for bit, and the averaged model PyTorch's eval-mode
//! logits. Both sides on one thread. `SWALR` is checked with the other schedules
//! (tests/training/schedules.rs).
use crate::common;

use tch::nn::{self, ModuleT, VarStore};
use tch::{Device, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::models::{BatchNorm2d, SyncSlot};
use trainbook::train::{update_bn, SwaModel};

/// The oracle's `nn.Sequential` under the same names (`0`, `1`, `5`).
fn model(vs: &VarStore) -> impl ModuleT {
    let root = vs.root();
    let conv =
        nn::conv2d(&root / "0", 3, 4, 3, nn::ConvConfig { padding: 1, ..Default::default() });
    let bn = BatchNorm2d::new(&root / "1", 4, &SyncSlot::default());
    let fc = nn::linear(&root / "5", 4, 3, Default::default());
    nn::seq_t()
        .add(conv)
        .add(bn)
        .add_fn(|x| x.relu().adaptive_avg_pool2d([1, 1]).flatten(1, -1))
        .add(fc)
}

/// Copies the oracle's `prefix.*` tensors into the model's variables of the same names.
fn load(vs: &VarStore, oracle: &[(String, Tensor)], prefix: &str) {
    let vars = vs.variables();
    let mut loaded = 0;
    tch::no_grad(|| {
        for (name, t) in common::with_prefix(oracle, prefix) {
            if let Some(v) = vars.get(&name) {
                v.shallow_clone().copy_(&t);
                loaded += 1;
            }
        }
    });
    assert_eq!(loaded, vars.len(), "every variable of the model from {prefix}*");
}

#[test]
fn swa_averages_and_update_bn_equal_torchs_bit_for_bit() {
    let _turn = common::module_turn(module_path!());
    tch::set_num_threads(1);
    let work = common::WorkDir::new("swa");
    let oracle = common::oracle_tensors("swa.py", "swa", &work);
    let get = |name: &str| common::get(&oracle, name).shallow_clone();
    let vs = VarStore::new(Device::Cpu);
    let net = model(&vs);
    load(&vs, &oracle, "init.");
    let mut swa = SwaModel::new(&vs);
    for i in 0..3 {
        load(&vs, &oracle, &format!("snap{i}."));
        swa.update_parameters(&vs).unwrap();
    }
    assert_eq!(swa.n_averaged(), 3);
    // AveragedModel's state dict: `module.<name>` for each variable (trainbook's BatchNorm has
    // no num_batches_tracked) and n_averaged.
    let torch_sd = common::with_prefix(&oracle, "sd.");
    for (name, t) in swa.state_dict() {
        let theirs =
            &torch_sd.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{name}")).1;
        assert!(t.equal(theirs), "{name}: the average");
    }
    let ours: Vec<String> = swa.state_dict().into_iter().map(|(n, _)| n).collect();
    let missing: Vec<&String> =
        torch_sd.iter().map(|(n, _)| n).filter(|n| !ours.contains(n)).collect();
    assert_eq!(missing, ["module.1.num_batches_tracked"]);

    // The average into the model, its BatchNorm statistics recomputed over the pictures.
    swa.copy_to(&vs).unwrap();
    let (x, y) = (get("x"), get("y"));
    let data = TensorDataset::new(&x, &y, (0..3).map(|c| c.to_string()).collect()).unwrap();
    let mut loader = DataLoader::new(data, 5).num_workers(0);
    update_bn(&mut loader, &vs, &net, Device::Cpu).unwrap();
    let vars = vs.variables();
    for name in ["1.running_mean", "1.running_var", "1.weight", "0.weight", "5.bias"] {
        assert!(vars[name].equal(&get(&format!("bn.{name}"))), "{name} after update_bn");
    }
    let logits = tch::no_grad(|| net.forward_t(&x, false));
    assert!(logits.equal(&get("logits")), "the averaged model's logits");

    // A reloaded state continues identically; a state without n_averaged is an error naming it.
    let mut again = SwaModel::new(&vs);
    again.load_state_dict(&swa.state_dict()).unwrap();
    assert_eq!(again.n_averaged(), 3);
    let no_count: Vec<(String, Tensor)> =
        swa.state_dict().into_iter().filter(|(n, _)| n != "n_averaged").collect();
    let err = again.load_state_dict(&no_count).unwrap_err().to_string();
    assert!(err.contains("n_averaged"), "{err}");
}
