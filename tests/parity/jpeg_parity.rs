//! JPEG decoding against Pillow, the decoder behind torchvision's `ImageFolder`: photo-like files
//! with noise, hard colour edges and thin coloured lines (where JPEG decoders differ most), of
//! odd sizes from 1x1 up, baseline and progressive, 4:2:0/4:2:2/4:4:4, grey, CMYK, restart
//! markers, junk before the end marker, corrupt scan data (libjpeg warns and goes on, as in
//! Pillow), and cut-off files (tests/oracle/jpeg.py writes them); YCCK files, which Pillow
//! cannot write, are written here with TurboJPEG (CMYK pixels compressed as YCCK) and decoded
//! by both.
//!
//! Both sides run libjpeg-turbo's integer decoder with the same settings, so the decoded bytes
//! must be equal, not close; `Resize` + `ToTensor` on top must then stay within 1/255 of
//! torchvision's, the bound of tests/parity/transforms_parity.rs for the transforms alone.
use crate::common;

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;
use trainbook::compose;
use trainbook::data::load_rgb;
use trainbook::transforms::{aug_rng, CenterCrop, Resize, ToTensor};

/// A YCCK JPEG of `w`x`h` CMYK pixels (a gradient with noise from a fixed LCG), as TurboJPEG
/// writes one: the colour transform to YCCK, Adobe's marker, the chroma subsampled as `subsamp`.
fn write_ycck(path: &std::path::Path, (w, h): (usize, usize), subsamp: turbojpeg_sys::TJSAMP) {
    use turbojpeg_sys as tj;
    let mut state = 2026u32;
    let cmyk: Vec<u8> = (0..w * h * 4)
        .map(|i| {
            state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let (x, y, c) = ((i / 4) % w, (i / 4) / w, i % 4);
            let base = [x * 255 / w.max(2), y * 255 / h.max(2), (x + y) * 97 % 256, 40][c];
            (base as i32 + (state >> 27) as i32 - 16).clamp(0, 255) as u8
        })
        .collect();
    // SAFETY: a compressor handle used and destroyed here; the source holds w*h*4 bytes; the
    // output buffer is TurboJPEG's, read then freed.
    let bytes = unsafe {
        let handle = tj::tj3Init(tj::TJINIT_TJINIT_COMPRESS as i32);
        assert!(!handle.is_null(), "tj3Init");
        for (param, value) in [
            (tj::TJPARAM_TJPARAM_QUALITY, 90),
            (tj::TJPARAM_TJPARAM_SUBSAMP, subsamp),
            (tj::TJPARAM_TJPARAM_COLORSPACE, tj::TJCS_TJCS_YCCK as i32),
        ] {
            assert_eq!(tj::tj3Set(handle, param as i32, value), 0, "tj3Set {param}");
        }
        let (mut buf, mut size) = (std::ptr::null_mut(), 0);
        let format = tj::TJPF_TJPF_CMYK;
        let rc = tj::tj3Compress8(
            handle,
            cmyk.as_ptr(),
            w as i32,
            0,
            h as i32,
            format,
            &mut buf,
            &mut size,
        );
        assert_eq!(rc, 0, "tj3Compress8");
        let bytes = std::slice::from_raw_parts(buf, size as usize).to_vec();
        tj::tj3Free(buf as *mut std::ffi::c_void);
        tj::tj3Destroy(handle);
        bytes
    };
    std::fs::write(path, bytes).unwrap();
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

#[test]
fn jpeg_decoding_equals_pillow_and_the_pipeline_torchvision() {
    let _turn = common::module_turn(module_path!());
    let dir = common::WorkDir::new("jpeg-parity");
    for (w, h, subsamp) in [(1, 1, 2), (17, 33, 2), (233, 157, 0), (640, 480, 2)] {
        let path = dir.join(format!("ycck_{w}x{h}_{subsamp}.jpg"));
        write_ycck(&path, (w, h), subsamp);
    }
    let out = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/jpeg.py"))
        .arg(&*dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "oracle: {}", String::from_utf8_lossy(&out.stderr));
    let cases: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let pipelines = [
        compose![Resize::new(256), CenterCrop::new(224), ToTensor],
        compose![Resize::new((31, 57)), ToTensor],
    ];

    let mut kinds = BTreeSet::new();
    let (mut decoded, mut pixels, mut worst_tensor) = (0, 0usize, 0f32);
    for case in &cases {
        let file = case["file"].as_str().unwrap();
        let kind = case["kind"].as_str().unwrap();
        kinds.insert(kind.split(' ').next().unwrap().to_string());
        let path = dir.join(file);
        let ours = load_rgb(&path);
        if !case["decoded"].as_bool().unwrap() {
            // Pillow: "image file is truncated"; we fail too, naming the file and the reason.
            let err = ours.expect_err(file).to_string();
            assert!(err.contains(file) && err.contains("truncated"), "{file}: {err}");
            continue;
        }
        let ours = ours.unwrap_or_else(|e| panic!("{file} ({kind}): {e}"));
        let pil = std::fs::read(dir.join(format!("{file}.rgb"))).unwrap();
        assert_eq!(ours.data().len(), pil.len(), "{file} ({kind}): size");
        let differing = ours.data().iter().zip(&pil).filter(|(a, b)| a != b).count();
        let largest = ours.data().iter().zip(&pil).map(|(a, b)| a.abs_diff(*b)).max().unwrap();
        assert_eq!(
            differing, 0,
            "{file} ({kind}): {differing} bytes differ from Pillow's, by up to {largest}/255"
        );
        decoded += 1;
        pixels += pil.len() / 3;

        for (k, (pipeline, want)) in
            pipelines.iter().zip(case["tensors"].as_array().unwrap()).enumerate()
        {
            let got = pipeline.apply_image(ours.clone(), &mut aug_rng(0, 0, 0)).unwrap();
            let shape: Vec<i64> =
                want["shape"].as_array().unwrap().iter().map(|v| v.as_i64().unwrap()).collect();
            assert_eq!(got.shape().iter().map(|&s| s as i64).collect::<Vec<_>>(), shape, "{file}");
            let theirs = f32s(&std::fs::read(dir.join(format!("{file}.{k}.f32"))).unwrap());
            let diff =
                got.data.iter().zip(&theirs).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            assert!(
                diff <= 1.0 / 255.0 + 1e-6,
                "{file} ({kind}) pipeline {k}: {:.3}/255 from torchvision",
                diff * 255.0
            );
            worst_tensor = worst_tensor.max(diff);
        }
    }
    let want: BTreeSet<String> = [
        "baseline",
        "progressive",
        "grey",
        "cmyk",
        "restart",
        "extraneous",
        "corrupt",
        "truncated",
        "ycck",
    ]
    .map(String::from)
    .into();
    assert_eq!(kinds, want, "the oracle covers every kind of file");
    println!(
        "{decoded} JPEGs ({pixels} pixels) decoded exactly as Pillow; decode + Resize + ToTensor \
         within {:.3}/255 of torchvision",
        worst_tensor * 255.0
    );
}
