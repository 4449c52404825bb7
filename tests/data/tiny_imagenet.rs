//! `TinyImageNet` reads the archive's layout (on the generated stand-in) with torchvision's
//! labels and pixels (tests/oracle/split.py's `ImageFolder` + `ToTensor`), and a damaged
//! archive is an error naming what is wrong.
use crate::common;
use crate::data_split::oracle;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use trainbook::data::{ensure_tiny_imagenet, DataLoader, Dataset, Split, TinyImageNet};
use trainbook::transforms::aug_rng;

/// `(file, wnid)` of each line of val_annotations.txt.
fn annotations(root: &Path) -> Vec<(String, String)> {
    std::fs::read_to_string(root.join("val/val_annotations.txt"))
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 6, "{l}");
            (f[0].to_string(), f[1].to_string())
        })
        .collect()
}

#[test]
fn tiny_imagenet_stand_in_reads_like_torchvision() {
    let _turn = common::module_turn(module_path!());
    let dir = common::WorkDir::new("tiny-imagenet");
    let root = dir.join("tiny-imagenet-200");
    ensure_tiny_imagenet(&root, true).unwrap();
    let train = TinyImageNet::new(&root, Split::Train).unwrap();
    let val = TinyImageNet::new(&root, "val".parse().unwrap()).unwrap();
    let mut wnids: Vec<String> = std::fs::read_to_string(root.join("wnids.txt"))
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert!(!wnids.is_sorted(), "wnids.txt is unsorted in the real set");
    wnids.sort();
    assert_eq!((train.classes(), val.classes()), (wnids.clone(), wnids.clone()));
    assert_eq!((train.len(), val.len()), (200, 50));
    assert_eq!(train.class_names().len(), 10);

    // Class names: the first name of each class's words.txt line.
    let words: BTreeMap<String, String> = std::fs::read_to_string(root.join("words.txt"))
        .unwrap()
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(w, names)| (w.to_string(), names.split(',').next().unwrap().trim().to_string()))
        .collect();
    let want_names: Vec<&str> = wnids.iter().map(|w| words[w].as_str()).collect();
    assert_eq!(train.class_names(), want_names);

    // Validation labels: the wnid of each annotation line, in the file's order.
    let want_val: Vec<(PathBuf, i64)> = annotations(&root)
        .into_iter()
        .map(|(f, w)| {
            (root.join("val/images").join(f), wnids.iter().position(|x| *x == w).unwrap() as i64)
        })
        .collect();
    assert_eq!(val.samples(), &want_val[..]);

    // Training samples, labels and pixels: torchvision's ImageFolder(root/train) + ToTensor.
    let greyscale = train
        .samples()
        .iter()
        .position(|(p, _)| image::open(p).unwrap().color() == image::ColorType::L8)
        .expect("the stand-in has greyscale JPEGs, as the real set");
    let picks: Vec<(&TinyImageNet, usize)> =
        vec![(&train, 0), (&train, 57), (&train, greyscale), (&val, 0), (&val, 31)];
    let paths: Vec<String> =
        picks.iter().map(|(d, i)| d.samples()[*i].0.to_str().unwrap().to_string()).collect();
    let train_dir = root.join("train").to_str().unwrap().to_string();
    let args: Vec<&str> = ["folder", train_dir.as_str()]
        .into_iter()
        .chain(paths.iter().map(String::as_str))
        .collect();
    let tv = oracle(&args, None);
    let want_classes: Vec<String> =
        tv["classes"].as_array().unwrap().iter().map(|c| c.as_str().unwrap().to_string()).collect();
    assert_eq!(want_classes, wnids);
    let want: Vec<(PathBuf, i64)> = tv["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (PathBuf::from(s[0].as_str().unwrap()), s[1].as_i64().unwrap()))
        .collect();
    assert_eq!(train.samples(), &want[..]);
    assert_eq!(train.targets(), want.iter().map(|s| s.1).collect::<Vec<_>>());
    for ((data, i), t) in picks.iter().zip(tv["tensors"].as_array().unwrap()) {
        let (img, label) = data.get(*i, &mut aug_rng(0, 0, *i as u64)).unwrap();
        assert_eq!(label, data.samples()[*i].1);
        let shape: Vec<usize> =
            t["shape"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as usize).collect();
        assert_eq!(img.shape().to_vec(), shape);
        // The same decoder as PIL's (libjpeg-turbo, same settings) and ToTensor's division by
        // 255 in float32 on both sides: equal values.
        let worst = img
            .data
            .iter()
            .zip(t["data"].as_array().unwrap())
            .map(|(a, b)| (a - b.as_f64().unwrap() as f32).abs() * 255.0)
            .fold(0.0f32, f32::max);
        assert!(
            worst == 0.0,
            "{}: differs from torchvision by up to {worst}/255",
            data.samples()[*i].0.display()
        );
    }

    let mut loader = DataLoader::new(val, 16).num_workers(2);
    let batch = loader.iter().next().unwrap().unwrap();
    assert_eq!(batch.images.size(), [16, 3, 64, 64]);
}

#[test]
fn tiny_imagenet_errors_name_the_problem() {
    let _turn = common::module_turn(module_path!());
    let dir = common::WorkDir::new("tiny-imagenet-bad");
    let root = dir.join("tiny");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/data-scripts/tiny_imagenet_standin.py");
    let ok = Command::new(common::venv_bin("python"))
        .arg(script)
        .arg(&root)
        .args(["--classes", "3", "--train-per-class", "2", "--val-per-class", "2"])
        .status()
        .unwrap();
    assert!(ok.success());
    assert_eq!(TinyImageNet::new(&root, Split::Train).unwrap().len(), 6);
    let err = |split| TinyImageNet::new(&root, split).unwrap_err().to_string();

    let wnids = std::fs::read(root.join("wnids.txt")).unwrap();
    std::fs::remove_file(root.join("wnids.txt")).unwrap();
    let e = err(Split::Train);
    assert!(e.contains("tiny/wnids.txt"), "{e}");
    // ensure_tiny_imagenet does not write over a folder that is not a Tiny ImageNet one.
    assert!(ensure_tiny_imagenet(&root, true).is_err());
    std::fs::write(root.join("wnids.txt"), &wnids).unwrap();

    let annotations = root.join("val/val_annotations.txt");
    let text = std::fs::read_to_string(&annotations).unwrap();
    std::fs::write(&annotations, format!("{text}val_0.JPEG\tn09999999\t0\t0\t9\t9\n")).unwrap();
    let e = err(Split::Val);
    assert!(
        e.contains("n09999999") && e.contains("line 7") && e.contains("val_annotations.txt"),
        "{e}"
    );
    std::fs::write(&annotations, &text).unwrap();
    std::fs::remove_file(root.join("val/images/val_3.JPEG")).unwrap();
    let e = err(Split::Val);
    assert!(e.contains("val/images/val_3.JPEG"), "{e}");

    let first = String::from_utf8(wnids).unwrap().lines().next().unwrap().to_string();
    std::fs::rename(root.join("train").join(&first), dir.join("moved")).unwrap();
    let e = err(Split::Train);
    assert!(e.contains(&format!("missing: {first}")), "{e}");
    std::fs::rename(root.join("words.txt"), dir.join("words.txt")).unwrap();
    assert!(err(Split::Train).contains("tiny/words.txt"));
    assert!("test".parse::<Split>().unwrap_err().to_string().contains("\"test\""));
}
