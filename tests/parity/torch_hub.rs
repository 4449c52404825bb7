//! torch.hub's cache against torch.hub itself (tests/oracle/torch_hub.py): the same folder under
//! the same environment variables, the same hash prefix read from a file name, torchvision
//! 0.28's ResNet weight URLs; and a download from a local HTTP server (no internet here) into the
//! cache, with the hash check, the offline reuse of a cached file and the errors.
use crate::common;

use std::io::Write;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tch::nn::VarStore;
use tch::Device;
use trainbook::hub::{cached_download, hash_prefix, hub_dir_from};
use trainbook::models::{load_weights, load_weights_arg, MnistNet, Weights, PRETRAINED};

fn oracle(args: &[&str], stdin: &str) -> String {
    let mut child = Command::new(common::venv_bin("python"))
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/oracle/torch_hub.py"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = common::wait_with_deadline(child, Duration::from_secs(120), "torch_hub.py");
    assert!(out.status.success(), "oracle {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_cache_folder_hash_prefixes_and_weight_urls_are_torchs() {
    let _turn = common::module_turn(module_path!());
    let envs = json!([
        {"TORCH_HOME": "/data/torch", "XDG_CACHE_HOME": "/x", "HOME": "/home/a"},
        {"XDG_CACHE_HOME": "/scratch/cache", "HOME": "/home/a"},
        {"HOME": "/home/b"},
        {"TORCH_HOME": "~/models", "HOME": "/home/c"},
        {"TORCH_HOME": "relative/torch", "HOME": "/home/d"},
    ]);
    let want: Vec<String> = serde_json::from_str(&oracle(&["dirs"], &envs.to_string())).unwrap();
    for (env, want) in envs.as_array().unwrap().iter().zip(want) {
        let var = |k: &str| env.get(k).and_then(Value::as_str).map(Into::into);
        let got = hub_dir_from(var("TORCH_HOME"), var("XDG_CACHE_HOME"), var("HOME"));
        assert_eq!(got, Path::new(&want), "{env}");
    }

    let names = [
        "resnet18-f37072fd.pth",
        "model-v2-abc123.pt",
        "a-.pth",
        "plain.pth",
        "x-12G.pth",
        "b-ff-00.pt",
    ];
    let want: Vec<Option<String>> =
        serde_json::from_str(&oracle(&[&["hashes"][..], &names[..]].concat(), "")).unwrap();
    let got: Vec<Option<String>> = names.iter().map(|n| hash_prefix(n).map(String::from)).collect();
    assert_eq!(got, want);

    let urls: Vec<(String, String, String)> = serde_json::from_str(&oracle(&["urls"], "")).unwrap();
    let ours: Vec<(String, String, String)> = PRETRAINED
        .iter()
        .map(|(m, w, u)| {
            let name = match w {
                Weights::ImageNet1kV1 => "IMAGENET1K_V1",
                Weights::ImageNet1kV2 => "IMAGENET1K_V2",
                Weights::Default => "DEFAULT",
            };
            (m.to_string(), name.to_string(), u.to_string())
        })
        .collect();
    // The weights files of these models that trainbook does not name: VGG-16's feature
    // extractor trained for SSD, without a classifier; MNASNet 0.5's file of the older MNASNet
    // layout; the RegNets' SWAG weights (trained by Facebook's SWAG project, bicubic
    // evaluation at other sizes).
    let not_offered = [("vgg16", "IMAGENET1K_FEATURES"), ("mnasnet0_5", "IMAGENET1K_V1")];
    let urls: Vec<_> = urls
        .into_iter()
        .filter(|(m, w, _)| !not_offered.contains(&(m.as_str(), w.as_str())))
        .filter(|(_, w, _)| !w.contains("SWAG"))
        .collect();
    assert_eq!(ours, urls);
}

/// `python -m http.server` on a free local port, serving `dir`; killed when dropped.
struct Server(Child, u16);

impl Server {
    fn start(dir: &Path) -> Server {
        let port = common::free_port();
        let child = Command::new(common::venv_bin("python"))
            .args(["-m", "http.server", &port.to_string(), "--bind", "127.0.0.1", "--directory"])
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(start.elapsed() < Duration::from_secs(30), "http.server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Server(child, port)
    }
    fn url(&self, name: &str) -> String {
        format!("http://127.0.0.1:{}/{name}", self.1)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_download_lands_in_the_cache_checked_and_is_reused_offline() {
    let _turn = common::module_turn(module_path!());
    let dir = common::WorkDir::new("torch-hub");
    let served = dir.join("served");
    std::fs::create_dir_all(&served).unwrap();
    tch::manual_seed(3);
    let vs = VarStore::new(Device::Cpu);
    let _ = MnistNet::new(&vs.root());
    let plain = served.join("mnist.pth");
    trainbook::models::save_state_dict(&vs, &plain).unwrap();
    let sha = oracle(&["sha256", plain.to_str().unwrap()], "");
    let name = format!("mnist-{}.pth", &sha.trim()[..8]);
    std::fs::copy(&plain, served.join(&name)).unwrap();
    std::fs::copy(&plain, served.join("mnist-00000000.pth")).unwrap();

    let cache = dir.join("cache");
    let server = Server::start(&served);
    let file = cached_download(&server.url(&name), Some(&cache), true, false).unwrap();
    assert_eq!(file, cache.join(&name));
    assert_eq!(std::fs::read(&file).unwrap(), std::fs::read(&plain).unwrap());
    let mut other = VarStore::new(Device::Cpu);
    let _ = MnistNet::new(&other.root());
    load_weights(&mut other, &file, true).unwrap();
    let (a, b) = (trainbook::models::state_dict(&vs), trainbook::models::state_dict(&other));
    assert_eq!(a.len(), b.len());
    assert!(a.iter().zip(&b).all(|((n, x), (m, y))| n == m && x.equal(y)));

    // A file whose content does not match the hash in its name is refused and not kept.
    let err = cached_download(&server.url("mnist-00000000.pth"), Some(&cache), true, false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("invalid hash value (expected \"00000000\", got \""), "{err}");
    let err404 = cached_download(&server.url("missing-1234.pth"), Some(&cache), true, false)
        .unwrap_err()
        .to_string();
    assert!(err404.contains("missing-1234.pth") && err404.contains("404"), "{err404}");
    drop(server);
    let left: Vec<_> = std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, [std::ffi::OsString::from(&name)], "only the good file stays in the cache");

    // Offline: the cached file is used as it is; a missing one names the URL and the fix.
    let again = cached_download(&format!("http://127.0.0.1:9/{name}"), Some(&cache), true, false);
    assert_eq!(again.unwrap(), file);
    let err =
        cached_download("http://127.0.0.1:9/resnet18-f37072fd.pth", Some(&cache), true, false)
            .unwrap_err()
            .to_string();
    assert!(
        err.starts_with("download http://127.0.0.1:9/resnet18-f37072fd.pth: ")
            && err.contains("offline? copy the file from a machine with internet to")
            && err.contains("resnet18-f37072fd.pth"),
        "{err}"
    );

    // --weights: a file as it is; a word that is neither a file nor a weights name is an error.
    let mut net = VarStore::new(Device::Cpu);
    let _ = MnistNet::new(&net.root());
    load_weights_arg(&mut net, "mnist", &file, true).unwrap();
    let err = load_weights_arg(&mut net, "mnist", Path::new("IMAGENET"), true).unwrap_err();
    assert!(err.to_string().contains("no such file, and not a weights name"), "{err}");
}
