//! `interpret::Interpretation` against what fastai's `ClassificationInterpretation` computes
//! (tests/oracle/interpretation.py, in torch and numpy): every sample's loss equal to
//! `F.cross_entropy(reduction="none")` and its probabilities to `softmax`, bit for bit; the top
//! losses in torch's stable descending order; `most_confused(2)` the same pairs in the same
//! order. And `plot_top_losses` draws the samples as the loader delivers them.
use crate::common;

use tch::{Device, Kind, Tensor};
use trainbook::data::{DataLoader, TensorDataset};
use trainbook::interpret::Interpretation;

#[test]
fn losses_top_losses_and_most_confused_are_fastais() {
    let _turn = common::module_turn(module_path!());
    let work = common::WorkDir::new("interpretation");
    let want = common::oracle_tensors("interpretation.py", "interp", &work);
    let get = |n: &str| common::get(&want, n).shallow_clone();
    let targets = Vec::<i64>::try_from(get("targets")).unwrap();
    let names: Vec<String> = (0..5).map(|c| format!("class {c}")).collect();
    let interp = Interpretation::new(&get("logits"), &targets, names.clone()).unwrap();

    let losses = Tensor::from_slice(interp.losses()).to_kind(Kind::Float);
    assert!(losses.equal(&get("losses")), "per-sample cross-entropy");
    let top = interp.top_losses(10);
    let index: Vec<i64> = top.iter().map(|t| t.index as i64).collect();
    assert_eq!(index, Vec::<i64>::try_from(get("top_index")).unwrap());
    let probs = get("probs");
    for t in &top {
        let row = probs.get(t.index as i64);
        assert_eq!(t.probability, row.double_value(&[t.predicted]), "sample {}", t.index);
        assert_eq!(t.actual_probability, row.double_value(&[t.actual]), "sample {}", t.index);
        assert_eq!(t.predicted, row.argmax(0, false).int64_value(&[]));
    }
    let confused = Vec::<i64>::try_from(get("confused").flatten(0, -1)).unwrap();
    let want: Vec<(String, String, usize)> = confused
        .chunks(3)
        .map(|r| (names[r[0] as usize].clone(), names[r[1] as usize].clone(), r[2] as usize))
        .collect();
    assert!(!want.is_empty(), "the oracle's data has pairs confused twice");
    assert_eq!(interp.most_confused(2), want);
}

#[test]
fn plot_top_losses_draws_the_loaders_samples() {
    let _turn = common::module_turn(module_path!());
    tch::manual_seed(3);
    let images = Tensor::rand([6, 3, 8, 8], (Kind::Float, Device::Cpu));
    let labels = Tensor::from_slice(&[0i64, 1, 0, 1, 0, 1]);
    let names = vec!["even".to_string(), "odd".to_string()];
    let data = TensorDataset::new(&images, &labels, names.clone()).unwrap();
    let loader = DataLoader::new(data, 2).num_workers(0);
    let logits =
        Tensor::from_slice(&[3.0f32, 0.0, 0.0, 1.0, 0.0, 2.0, 1.0, 0.0, 0.5, 0.0, 0.0, 4.0])
            .view([6, 2]);
    let interp = Interpretation::new(&logits, &[0, 1, 0, 1, 0, 1], names).unwrap();
    assert_eq!(interp.top_losses(1)[0].index, 2, "sample 2: even, scored 0 against odd's 2");
    assert!(loader.sample(3).unwrap().0.to_tensor().equal(&images.get(3)));
    assert!(loader.sample(6).is_err(), "past the end");
    let figure = interp.plot_top_losses(&loader, 4, 2).unwrap();
    // The same grid drawn by hand: the four largest losses' pictures and titles, in order.
    let top = interp.top_losses(4);
    let pictures: Vec<Tensor> = top.iter().map(|t| images.get(t.index as i64)).collect();
    let name = |c: i64| if c == 0 { "even" } else { "odd" };
    let titles: Vec<String> = top
        .iter()
        .map(|t| {
            format!(
                "{} / {}\n{:.2} / {:.2}",
                name(t.predicted),
                name(t.actual),
                t.loss,
                t.probability
            )
        })
        .collect();
    let by_hand = trainbook::figures::image_grid(&Tensor::stack(&pictures, 0), &titles, 2).unwrap();
    assert_eq!(figure.png(), by_hand.png());
}
