//! A data set's extra inputs (`Dataset::extra_inputs`): the loader stacks each of them along a
//! new first dimension in the batch's sample order, draws them from the sample's own random
//! stream after its image (so any number of loader threads gives the same batches), refuses
//! samples whose inputs differ in count, shape or kind with an error naming the sample, and a
//! step of one's own reads them in `train_epoch_step`, `evaluate_step`, and `Trainer::test`,
//! `Trainer::predict` (and its test-time augmentation) and `Trainer::lr_find` given the step,
//! where a CUDA graph on the CPU leaves such batches eager and says why; a step may read them
//! as a struct of its own (`tensor_fields!`, `StepBatch::fields`), the data set giving each
//! sample's as that struct's tensors.
use crate::common;

use std::cell::RefCell;

use rand::Rng;
use tch::nn::{self, Module};
use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, Dataset, TensorFields};
use trainbook::train::{
    evaluate_step, train_epoch_step, CrossEntropyLoss, EpochOptions, Optimizer, StepBatch,
    StepGraph, StepOutput, TrainStep,
};
use trainbook::transforms::{aug_rng, AugRng, TensorImage};

trainbook::tensor_fields! {
    /// A sample's extra inputs as a struct of one's own: the `[3]` vector and the index.
    struct VectorAndIndex { vector: Tensor, index: Tensor }
}

/// `len` samples: a 1x2x2 image of random values, label `index % 3`, and two extra inputs: a
/// `[3]` float vector (two random draws after the image's, then the index) and the index as an
/// int64 scalar. Sample `odd` (if any) gives a `[4]` vector, sample `short` only one input.
struct WithExtras {
    len: usize,
    odd: Option<usize>,
    short: Option<usize>,
}

impl Dataset for WithExtras {
    fn len(&self) -> usize {
        self.len
    }
    fn get(&self, index: usize, rng: &mut AugRng) -> trainbook::Result<(TensorImage, i64)> {
        let data: Vec<f32> = (0..4).map(|_| rng.random::<f32>()).collect();
        Ok((TensorImage { channels: 1, height: 2, width: 2, data }, self.label(index)))
    }
    fn label(&self, index: usize) -> i64 {
        index as i64 % 3
    }
    fn classes(&self) -> Vec<String> {
        ["a", "b", "c"].map(String::from).to_vec()
    }
    fn extra_inputs(&self, index: usize, rng: &mut AugRng) -> trainbook::Result<Vec<Tensor>> {
        let mut v = vec![rng.random::<f32>(), rng.random::<f32>(), index as f32];
        if self.odd == Some(index) {
            v.push(0.0);
        }
        let vector = Tensor::from_slice(&v);
        if self.short == Some(index) {
            return Ok(vec![vector]);
        }
        Ok(VectorAndIndex { vector, index: Tensor::from(index as i64) }.into_tensors())
    }
}

/// Every batch of epoch 1 of a loader (shuffled or not) with `workers` threads.
fn batches(
    dataset: WithExtras,
    shuffle: bool,
    workers: usize,
) -> Vec<trainbook::Result<trainbook::data::Batch>> {
    let mut loader = DataLoader::new(dataset, 4).shuffle(shuffle).seed(5).num_workers(workers);
    loader.set_epoch(1);
    loader.iter().collect()
}

#[test]
fn extra_inputs_are_stacked_in_sample_order_from_the_samples_own_streams() {
    let _turn = common::module_turn(module_path!());
    let plain = || WithExtras { len: 10, odd: None, short: None };
    let inline: Vec<_> = batches(plain(), true, 0).into_iter().map(Result::unwrap).collect();
    assert_eq!(inline.len(), 3);
    for b in &inline {
        let [vectors, indices] = &b.extra_inputs[..] else { panic!("two extra inputs") };
        assert_eq!(vectors.size(), [b.len() as i64, 3]);
        assert_eq!((indices.size(), indices.kind()), (vec![b.len() as i64], Kind::Int64));
        assert_eq!(
            Vec::<i64>::try_from(indices).unwrap(),
            b.indices.iter().map(|&i| i as i64).collect::<Vec<_>>()
        );
        for (k, &index) in b.indices.iter().enumerate() {
            // The sample's stream (seed 5, epoch 1) after the image's four draws.
            let mut rng = aug_rng(5, 1, index as u64);
            let _image: Vec<f32> = (0..4).map(|_| rng.random::<f32>()).collect();
            let expected = [rng.random::<f32>(), rng.random::<f32>(), index as f32];
            assert_eq!(Vec::<f32>::try_from(vectors.get(k as i64)).unwrap(), expected);
        }
    }
    // Two loader threads: the same batches.
    let threaded: Vec<_> = batches(plain(), true, 2).into_iter().map(Result::unwrap).collect();
    for (a, b) in inline.iter().zip(&threaded) {
        assert_eq!(a.indices, b.indices);
        assert!(a.images.equal(&b.images));
        for (x, y) in a.extra_inputs.iter().zip(&b.extra_inputs) {
            assert!(x.equal(y));
        }
    }
}

#[test]
fn samples_whose_extra_inputs_differ_are_errors_naming_them() {
    let _turn = common::module_turn(module_path!());
    for workers in [0, 2] {
        // In order: samples 6 and 3 are not the first of their batches (4-7, 0-3).
        let odd = batches(WithExtras { len: 8, odd: Some(6), short: None }, false, workers);
        let err = odd.into_iter().find_map(Result::err).expect("an error").to_string();
        assert!(err.contains("extra input 0 of sample 6 is [4] Float"), "{err}");
        let short = batches(WithExtras { len: 8, odd: None, short: Some(3) }, false, workers);
        let err = short.into_iter().find_map(Result::err).expect("an error").to_string();
        assert!(err.contains("sample 3 has 1 extra inputs"), "{err}");
    }
}

/// A linear model on the flattened image beside the `[3]` vector (read as the batch's
/// struct when `as_struct`, else as its first extra input).
struct Beside {
    head: nn::Linear,
    as_struct: bool,
}

impl Beside {
    fn logits(&self, b: &StepBatch<'_>) -> Tensor {
        let vector = if self.as_struct {
            let fields: VectorAndIndex = b.fields().unwrap();
            assert_eq!(fields.index.size(), [b.images.size()[0]], "the index of each sample");
            fields.vector
        } else {
            b.extra_inputs[0].shallow_clone()
        };
        self.head.forward(&Tensor::cat(&[&b.images.flatten(1, -1), &vector], 1))
    }
}

impl TrainStep for Beside {
    fn train_step(&self, b: &StepBatch<'_>) -> trainbook::Result<StepOutput> {
        let output = self.logits(b);
        Ok(StepOutput { loss: CrossEntropyLoss::default().mean(&output, b.target), output })
    }
    fn eval_step(&self, b: &StepBatch<'_>) -> trainbook::Result<StepOutput> {
        let output = self.logits(b);
        Ok(StepOutput { loss: CrossEntropyLoss::default().per_sample(&output, b.target), output })
    }
}

#[test]
fn a_step_reading_the_batch_as_its_own_struct_trains_as_one_reading_the_tensors() {
    let _turn = common::module_turn(module_path!());
    let train = |as_struct: bool| {
        tch::manual_seed(0);
        let vs = nn::VarStore::new(Device::Cpu);
        let step = Beside { head: nn::linear(vs.root(), 4 + 3, 3, Default::default()), as_struct };
        let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
        let data = WithExtras { len: 10, odd: None, short: None };
        let mut loader = DataLoader::new(data, 4).shuffle(true).num_workers(2);
        let opts = EpochOptions::on(Device::Cpu).progress(false);
        for epoch in 0..2 {
            loader.set_epoch(epoch);
            train_epoch_step(&step, &mut loader, &mut opt, &opts, &mut ()).unwrap();
        }
        (step.head.ws.copy(), step.head.bs.unwrap().copy())
    };
    let (tensors, fields) = (train(false), train(true));
    assert!(tensors.0.equal(&fields.0) && tensors.1.equal(&fields.1), "the same weights");
    // A batch whose extra inputs are not the struct's fields: an error naming them.
    let (images, target) =
        (Tensor::zeros([1, 1, 2, 2], (Kind::Float, Device::Cpu)), Tensor::from_slice(&[0i64]));
    let one = [Tensor::zeros([1, 3], (Kind::Float, Device::Cpu))];
    let task = trainbook::train::Task::Classification;
    let batch = StepBatch { images: &images, target: &target, extra_inputs: &one, task };
    let err = batch.fields::<VectorAndIndex>().unwrap_err().to_string();
    assert!(
        err.contains("VectorAndIndex has 2 fields (vector, index), but the batch has 1"),
        "{err}"
    );
}

#[test]
fn a_step_of_ones_own_trains_on_the_extra_inputs_and_a_graph_on_the_cpu_leaves_it_eager() {
    let _turn = common::module_turn(module_path!());
    tch::manual_seed(0);
    let vs = nn::VarStore::new(Device::Cpu);
    let step =
        Beside { head: nn::linear(vs.root(), 4 + 3, 3, Default::default()), as_struct: false };
    let mut opt = Optimizer::sgd(&vs, 0.1, 0.0);
    let mut loader = DataLoader::new(WithExtras { len: 10, odd: None, short: None }, 4);
    let graph = RefCell::new(StepGraph::new());
    let opts = EpochOptions::on(Device::Cpu).progress(false).cuda_graph(&graph);
    let before = step.head.ws.copy();
    let summary = train_epoch_step(&step, &mut loader, &mut opt, &opts, &mut ()).unwrap();
    assert_eq!((summary.samples, summary.steps), (10, 3));
    assert!(!step.head.ws.equal(&before), "the step trained the head");
    let graph = graph.borrow();
    // The graph would capture the extra inputs too; on the CPU the step runs eagerly for
    // the CPU's reason.
    assert!(
        graph.eager_reason().unwrap().contains("not on a CUDA GPU"),
        "{:?}",
        graph.eager_reason()
    );
    assert_eq!((graph.eager_steps(), graph.replays()), (3, 0));

    // Evaluation: the exact mean of the per-sample losses the step gives, over all 10 samples.
    let v =
        evaluate_step(&step, &mut loader, &EpochOptions::on(Device::Cpu).progress(false)).unwrap();
    let (mut sum, mut outputs, mut flipped) = (0.0, Vec::new(), Vec::new());
    for b in loader.iter() {
        let b = b.unwrap();
        let inputs = [b.extra_inputs[0].shallow_clone()];
        let batch = StepBatch {
            images: &b.images,
            target: &b.labels,
            extra_inputs: &inputs,
            task: trainbook::train::Task::Classification,
        };
        let out = tch::no_grad(|| step.eval_step(&batch).unwrap());
        let flip = b.images.flip([-1]);
        let view = StepBatch { images: &flip, ..batch };
        flipped.push(tch::no_grad(|| step.eval_step(&view).unwrap()).output);
        outputs.push(out.output.shallow_clone());
        let losses = CrossEntropyLoss::default().per_sample(&out.output, &b.labels);
        sum += losses.sum(Kind::Double).double_value(&[]);
    }
    assert_eq!((v.samples, v.loss), (10, sum / 10.0));
    // The test stage with the same step: the same evaluation.
    let dist = trainbook::dist::Dist::single(Device::Cpu);
    let trainer = trainbook::fit::Trainer::new(&dist).progress(false);
    let mut vs = vs;
    let own: &dyn TrainStep = &step;
    let t = trainer.test(&mut vs, own, &mut loader).unwrap();
    assert_eq!((t.samples, t.loss), (10, v.loss));
    // Prediction: the step's outputs in the data set's order, and with a flipped view the
    // mean of the two softmaxes.
    let (outputs, flipped) = (Tensor::cat(&outputs, 0), Tensor::cat(&flipped, 0));
    let predicted = trainer.predict(&mut vs, own, &mut loader).unwrap();
    assert!(predicted.equal(&outputs));
    let views = [trainbook::fit::TtaView::HorizontalFlip];
    let tta = trainer.predict_tta(&mut vs, own, &mut loader, &views).unwrap();
    let p = |t: &Tensor| t.softmax(1, Kind::Float);
    assert!(tta.equal(&((p(&outputs) + p(&flipped)) / 2.0)));
    // The range test through the step: a curve, and the weights put back.
    let weights = step.head.ws.copy();
    let find = trainbook::train::LrFindOptions::default();
    let curve = trainer.lr_find(&mut vs, own, &mut opt, &mut loader, find).unwrap();
    assert!(curve.lrs.len() > 3 && curve.lrs.len() == curve.losses.len(), "{curve:?}");
    assert!(step.head.ws.equal(&weights));
}
