//! Loader throughput (img/s) on the DesignSafe stand-in JPEGs, trainbook vs torchvision in the
//! same run: the course's train transform (AutoAugment, Resize((244,244)), ToTensor), its val
//! transform (Resize((244,244)), ToTensor), and the recipe's augmentations in their place
//! (RandAugment; TrivialAugmentWide then RandomErasing(0.25) after ToTensor; AugMix), batch
//! 16, shuffled, 0 and 2 workers.
//!
//!     cargo bench --bench loader [-- DATA_DIR]
//!
//! Generates the stand-in (data/designsafe/Dataset_2) if missing. Writes target/bench/loader.json.
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use trainbook::compose;
use trainbook::data::{DataLoader, ImageFolder};
use trainbook::transforms::{
    AugMix, AutoAugment, Compose, RandAugment, RandomErasing, Resize, ToTensor, TrivialAugmentWide,
};

fn main() -> anyhow::Result<()> {
    let root = env!("CARGO_MANIFEST_DIR");
    let python =
        PathBuf::from(std::env::var("TRAINBOOK_VENV").unwrap_or_else(|_| format!("{root}/.venv")))
            .join("bin/python");
    let data = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(root).join("data/designsafe/Dataset_2"));
    if !data.join("Train").exists() {
        let status = Command::new(&python)
            .arg(format!("{root}/data-scripts/designsafe_standin.py"))
            .arg(&data)
            .status()?;
        anyhow::ensure!(status.success(), "could not generate the stand-in data set");
    }
    let train_dir = data.join("Train");
    type MakePipeline = fn() -> Compose;
    let pipelines: [(&str, MakePipeline); 5] = [
        ("train", || compose![AutoAugment::imagenet(), Resize::new((244, 244)), ToTensor]),
        ("val", || compose![Resize::new((244, 244)), ToTensor]),
        ("ra", || compose![RandAugment::default(), Resize::new((244, 244)), ToTensor]),
        ("ta_wide_erase", || {
            let erase = RandomErasing::new(0.25).expect("a valid probability");
            compose![TrivialAugmentWide::default(), Resize::new((244, 244)), ToTensor, erase]
        }),
        ("augmix", || compose![AugMix::default(), Resize::new((244, 244)), ToTensor]),
    ];

    let mut ours = serde_json::Map::new();
    for (name, make) in pipelines {
        for workers in [0usize, 2] {
            let mut loader =
                DataLoader::new(ImageFolder::new(&train_dir)?.with_transform(make()), 16)
                    .shuffle(true)
                    .num_workers(workers);
            let start = Instant::now();
            let mut n = 0;
            for batch in loader.iter() {
                n += batch?.len();
            }
            let rate = n as f64 / start.elapsed().as_secs_f64();
            ours.insert(format!("{name}/workers={workers}"), rate.into());
        }
    }
    let out = Command::new(&python)
        .arg(format!("{root}/benches/torchvision_loader.py"))
        .arg(&train_dir)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "torchvision side failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let theirs: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(&out.stdout)?;

    println!(
        "loader throughput on {} (batch 16, {} cores)",
        train_dir.display(),
        std::thread::available_parallelism()?.get()
    );
    println!(
        "{:<20} {:>14} {:>16} {:>8}",
        "pipeline/workers", "trainbook img/s", "torchvision img/s", "ratio"
    );
    let mut report = serde_json::Map::new();
    for (key, v) in &ours {
        let (a, b) = (
            v.as_f64().unwrap_or(0.0),
            theirs.get(key).and_then(|x| x.as_f64()).unwrap_or(f64::NAN),
        );
        println!("{key:<20} {a:>14.1} {b:>16.1} {:>7.2}x", a / b);
        report.insert(
            key.clone(),
            serde_json::json!({"trainbook": a, "torchvision": b, "ratio": a / b}),
        );
    }
    std::fs::create_dir_all(format!("{root}/target/bench"))?;
    std::fs::write(
        format!("{root}/target/bench/loader.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    Ok(())
}
