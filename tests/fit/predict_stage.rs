//! `Trainer::predict` and `Trainer::predict_tta` over a loader: every sample's output in the
//! data set's order, the same on 2 Gloo ranks as on one (each rank predicts its shuffled
//! share, padding repeats left out), bit for bit with a model that hands its input back; test-
//! time augmentation averages the softmax of the batch and of its views.
use crate::common;

use std::sync::Arc;

use tch::nn::{ModuleT, VarStore};
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::dist::Dist;
use trainbook::fit::{Trainer, TtaView};
use trainbook::launch::spawn;

/// Hands each picture's values back as its output.
#[derive(Debug)]
struct Identity;

impl ModuleT for Identity {
    fn forward_t(&self, xs: &Tensor, _train: bool) -> Tensor {
        xs.flatten(1, -1)
    }
}

/// 15 samples of 4 values, as pictures [1, 1, 4] (so a horizontal flip reverses them).
fn data() -> (Arc<TensorDataset>, Tensor) {
    let values = Tensor::arange(60, (Kind::Float, Device::Cpu)).view([15, 4]) * 0.25 - 7.0;
    let labels = Tensor::zeros([15], (Kind::Int64, Device::Cpu));
    let pictures = values.view([15, 1, 1, 4]);
    let ds = TensorDataset::new(&pictures, &labels, (0..4).map(|c| c.to_string()).collect());
    (Arc::new(ds.unwrap()), values)
}

fn model() -> VarStore {
    let vs = VarStore::new(Device::Cpu);
    let _ = vs.root().zeros("unused", &[1]);
    vs
}

#[test]
fn predictions_come_back_in_the_data_sets_order_from_every_rank() {
    let _turn = common::module_turn(module_path!());
    let (ds, values) = data();
    let dist = Dist::single(Device::Cpu);
    let mut loader = DataLoader::from_arc(ds.clone(), 4).shuffle(true).num_workers(0);
    let mut vs = model();
    let trainer = Trainer::new(&dist).progress(false);
    let out = trainer.predict(&mut vs, &Identity, &mut loader).unwrap();
    assert!(out.equal(&values), "every sample's output at its index");
    let tta =
        trainer.predict_tta(&mut vs, &Identity, &mut loader, &[TtaView::HorizontalFlip]).unwrap();
    let want = (values.softmax(1, Kind::Float) + values.flip([1]).softmax(1, Kind::Float)) / 2.0;
    assert!(tta.equal(&want), "{tta} vs {want}");
    let none = trainer.predict_tta(&mut vs, &Identity, &mut loader, &[]).unwrap();
    assert!(none.equal(&values.softmax(1, Kind::Float)));
    let doubled = TtaView::Custom(Arc::new(|x: &Tensor| x * 2.0));
    let two = trainer.predict_tta(&mut vs, &Identity, &mut loader, &[doubled]).unwrap();
    let want = (values.softmax(1, Kind::Float) + (&values * 2.0).softmax(1, Kind::Float)) / 2.0;
    assert!(two.equal(&want));

    // Two ranks, shuffled shares of 8 (one padding repeat): the same tensors on both.
    let ranks = spawn(2, |dist| {
        let mut loader = DataLoader::from_arc(ds.clone(), 3).distributed(dist).num_workers(0);
        let mut vs = model();
        let t = Trainer::new(dist).progress(false);
        let out = t.predict(&mut vs, &Identity, &mut loader)?;
        let tta = t.predict_tta(&mut vs, &Identity, &mut loader, &[TtaView::HorizontalFlip])?;
        let host = |t: Tensor| Vec::<f32>::try_from(t.view([-1])).unwrap();
        Ok((host(out), host(tta)))
    })
    .unwrap();
    let host = |t: &Tensor| Vec::<f32>::try_from(t.view([-1])).unwrap();
    for (out, flipped) in ranks {
        assert_eq!(out, host(&values));
        assert_eq!(flipped, host(&tta));
    }
}
