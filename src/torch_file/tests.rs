//! Round trips through libtorch's pickler, without Python (tests/torch_files.rs checks the files
//! against PyTorch's own torch.save and torch.load).
use super::*;
use tch::{Device, Kind};

fn scratch(name: &str) -> std::path::PathBuf {
    let dir =
        std::env::temp_dir().join(format!("trainbook-torch-file-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("value.pt")
}

#[test]
fn a_nested_value_round_trips_with_its_tensors_bit_for_bit() {
    let w = Tensor::randn([3, 4], (Kind::Float, Device::Cpu));
    let h = Tensor::arange(6, (Kind::BFloat16, Device::Cpu)).view([2, 3]);
    let value = TorchValue::Dict(vec![
        ("epoch".into(), 7i64.into()),
        ("loss".into(), 0.1f64.into()),
        ("done".into(), false.into()),
        ("note".into(), TorchValue::None),
        (
            "model_state_dict".into(),
            TorchValue::from_tensors(&[("fc.weight".into(), w.shallow_clone())]),
        ),
        (TorchValue::Int(3), TorchValue::List(vec![h.shallow_clone().into(), "x".into()])),
        ("pair".into(), TorchValue::Tuple(vec![1i64.into(), 2.5f64.into()])),
    ]);
    let path = scratch("nested");
    save(&path, &value).unwrap();
    let back = load(&path).unwrap();
    assert_eq!(back.keys(), ["epoch", "loss", "done", "note", "model_state_dict", "3", "pair"]);
    assert_eq!(back.get("epoch").and_then(TorchValue::as_i64), Some(7));
    assert_eq!(
        back.get("loss").and_then(TorchValue::as_f64).map(f64::to_bits),
        Some(0.1f64.to_bits())
    );
    assert!(matches!(back.get("done"), Some(TorchValue::Bool(false))));
    assert!(matches!(back.get("note"), Some(TorchValue::None)));
    let sd = back.get("model_state_dict").and_then(TorchValue::as_tensor_dict).unwrap();
    assert_eq!(sd[0].0, "fc.weight");
    assert!(sd[0].1.equal(&w));
    match &back {
        TorchValue::Dict(entries) => match &entries[5] {
            (TorchValue::Int(3), TorchValue::List(items)) => {
                assert_eq!(items[0].as_tensor().unwrap().kind(), Kind::BFloat16);
                assert!(items[0].as_tensor().unwrap().equal(&h));
                assert_eq!(items[1].as_str(), Some("x"));
            }
            other => panic!("entry 5: {other:?}"),
        },
        other => panic!("{other:?}"),
    }
    assert!(matches!(back.get("pair"), Some(TorchValue::Tuple(v)) if v.len() == 2));
}

#[test]
fn a_file_that_is_not_a_torch_file_is_an_error_naming_it() {
    let path = scratch("garbage");
    std::fs::write(&path, b"\x80\x02not a zip").unwrap();
    let err = load(&path).unwrap_err().to_string();
    assert!(err.contains(&path.display().to_string()) && err.contains("legacy"), "{err}");
    std::fs::write(&path, b"PK\x03\x04 truncated").unwrap();
    let err = load(&path).unwrap_err().to_string();
    assert!(err.contains("not a valid torch.save file"), "{err}");
    let missing = path.with_file_name("missing.pt");
    let err = load(&missing).unwrap_err().to_string();
    assert!(err.starts_with(&missing.display().to_string()), "{err}");
}

#[test]
fn a_state_dict_is_found_in_a_checkpoint_and_its_ddp_prefix_removed() {
    let t = Tensor::ones([2], (Kind::Float, Device::Cpu));
    let bare = TorchValue::from_tensors(&[("module.a".into(), t.shallow_clone())]);
    let (key, sd) = state_dict_of(&bare, Path::new("x.pt")).unwrap();
    assert_eq!((key, sd[0].0.as_str()), (None, "a"));
    let ckpt = TorchValue::Dict(vec![
        ("epoch".into(), 1i64.into()),
        ("model".into(), TorchValue::from_tensors(&[("b".into(), t.shallow_clone())])),
    ]);
    let (key, sd) = state_dict_of(&ckpt, Path::new("x.pt")).unwrap();
    assert_eq!((key, sd[0].0.as_str()), (Some("model"), "b"));
    let err =
        state_dict_of(&TorchValue::Dict(vec![("epoch".into(), 1i64.into())]), Path::new("x.pt"))
            .unwrap_err()
            .to_string();
    assert!(err.contains("x.pt") && err.contains("[\"epoch\"]"), "{err}");
}

#[test]
fn a_damaged_pickle_is_an_error_never_a_panic() {
    use std::io::Read;
    let value = TorchValue::Dict(vec![
        ("w".into(), Tensor::randn([2, 3], (Kind::Float, Device::Cpu)).into()),
        ("steps".into(), TorchValue::List(vec![1i64.into(), (1i64 << 40).into(), (-3i64).into()])),
        ("lr".into(), 0.25f64.into()),
        ("pair".into(), TorchValue::Tuple(vec!["a".into(), TorchValue::None, true.into()])),
    ]);
    let bytes = to_bytes(&value).unwrap();
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).unwrap();
    let mut records = std::collections::HashMap::new();
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).unwrap();
        let name = entry.name().split_once('/').unwrap().1.to_string();
        let mut data = Vec::new();
        entry.read_to_end(&mut data).unwrap();
        records.insert(name, data);
    }
    let pkl = records["data.pkl"].clone();
    let mut record = |name: &str| records.get(name).cloned().ok_or_else(|| format!("no {name}"));
    let whole = read::unpickle(&pkl, &mut record).unwrap();
    assert_eq!(whole.keys(), ["w", "steps", "lr", "pair"]);
    for len in 0..pkl.len() {
        assert!(read::unpickle(&pkl[..len], &mut record).is_err(), "a prefix of {len} bytes");
    }
    for at in 0..pkl.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = pkl.clone();
            bad[at] ^= flip;
            let _ = read::unpickle(&bad, &mut record);
        }
    }
}
