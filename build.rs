//! Build script: compiles the c10d shim (`csrc/`) against the same libtorch that `torch-sys`
//! found, links it to `torch_cpu`/`c10` (plus `torch_cuda`/`c10_cuda` with the `cuda` feature),
//! and gives this package's binaries an rpath to the libtorch directory so that they run
//! without `LD_LIBRARY_PATH`.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=csrc/c10d_shim.cpp");
    println!("cargo:rerun-if-changed=csrc/c10d_shim.h");
    println!("cargo:rerun-if-changed=csrc/ddp_shim.cpp");
    println!("cargo:rerun-if-changed=csrc/shim_internal.hpp");
    println!("cargo:rerun-if-changed=csrc/optim_amp_shim.cpp");
    println!("cargo:rerun-if-changed=csrc/optim_amp_shim.h");
    println!("cargo:rerun-if-changed=csrc/device_shim.cpp");
    println!("cargo:rerun-if-changed=csrc/device_shim.h");
    println!("cargo:rerun-if-changed=csrc/sync_bn_shim.cpp");
    println!("cargo:rerun-if-changed=csrc/torch_file_shim.cpp");
    println!("cargo:rerun-if-changed=csrc/torch_file_shim.h");
    println!("cargo:rerun-if-changed=csrc/sync_bn_shim.h");
    println!("cargo:rerun-if-changed=csrc/cuda_graph_shim.cpp");
    println!("cargo:rerun-if-changed=csrc/cuda_graph_shim.h");
    println!("cargo:rerun-if-changed=csrc/profiler_shim.cpp");
    println!("cargo:rerun-if-changed=csrc/profiler_shim.h");
    println!("cargo:rerun-if-changed=csrc/script_shim.cpp");
    println!("cargo:rerun-if-changed=csrc/script_shim.h");
    for var in ["LIBTORCH_USE_PYTORCH", "LIBTORCH_CXX11_ABI", "GLOO_INCLUDE_DIR"] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    // torch-sys declares `links = "tch"` and prints `cargo:libtorch_lib=DIR`.
    let lib_dir = PathBuf::from(env::var("DEP_TCH_LIBTORCH_LIB").unwrap_or_else(|_| {
        fail(
            "torch-sys did not report a libtorch directory; run `make setup` \
             (scripts/setup/setup.sh)",
        )
    }));
    // Resolve links (.venv/libtorch -> site-packages/torch) so that siblings such as
    // site-packages/nvidia are found.
    let real_lib_dir = std::fs::canonicalize(&lib_dir).unwrap_or_else(|_| lib_dir.clone());
    let torch_root =
        real_lib_dir.parent().map(Path::to_path_buf).unwrap_or_else(|| real_lib_dir.clone());
    let include = torch_root.join("include");
    if !include.join("torch/csrc/distributed/c10d/ProcessGroupGloo.hpp").exists() {
        fail(&format!(
            "libtorch at {} has no c10d headers; use the PyPI torch==2.13.0 wheel (`make setup`)",
            torch_root.display()
        ));
    }
    let gloo_include = gloo_include_dir();

    // Every file with the same flags in every configuration, so that the compiler cache
    // compiles each once: the `cuda` feature adds its defines and CUDA include directories only
    // to the three files that read them (`#ifdef USE_C10D_NCCL`/`USE_CUDA`); the others include
    // no header that depends on them, and in a `cuda` build they are cache hits instead of six
    // more compilations against torch's headers (about 4 CPU-minutes on 2 cores).
    let cuda = env::var_os("CARGO_FEATURE_CUDA").is_some();
    let base = || {
        let mut build = cc::Build::new();
        build
            .cpp(true)
            .pic(true)
            .warnings(false)
            // Fixed, not the profile's: the dev build, clippy, the exported notebooks (opt-level
            // 2) and the kernel cache then compile the shim with the same flags, so the compiler
            // cache (.cargo/config.toml's CXX, scripts/setup/c++-via-sccache) compiles it once
            // for all of them.
            .opt_level(2)
            .debug(false)
            .std("c++20")
            .define("USE_C10D_GLOO", None)
            .define("_GLIBCXX_USE_CXX11_ABI", cxx11_abi().as_str())
            .define("GLOG_USE_GLOG_EXPORT", None)
            .include(&include)
            .include(include.join("torch/csrc/api/include"))
            .include(&gloo_include);
        build
    };
    let common = base()
        .file("csrc/ddp_shim.cpp")
        .file("csrc/optim_amp_shim.cpp")
        .file("csrc/sync_bn_shim.cpp")
        .file("csrc/torch_file_shim.cpp")
        .file("csrc/profiler_shim.cpp")
        .file("csrc/script_shim.cpp")
        .compile_intermediates();
    let mut build = base();
    build.file("csrc/c10d_shim.cpp").file("csrc/device_shim.cpp").file("csrc/cuda_graph_shim.cpp");
    if cuda {
        build.define("USE_C10D_NCCL", None).define("USE_CUDA", None);
        for dir in cuda_include_dirs(&torch_root) {
            build.include(dir);
        }
    }
    build.objects(common).compile("trainbook_c10d");

    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    if cuda {
        // The shim's NCCL code references libtorch_cuda, so the linker keeps it (also in crates
        // that depend on trainbook); loading it is what registers CUDA with libtorch.
        println!("cargo:rustc-link-lib=dylib=torch_cuda");
        println!("cargo:rustc-link-lib=dylib=c10_cuda");
        // A binary that never reaches the shim's NCCL code (a benchmark calling only tch) would
        // otherwise drop libtorch_cuda under the linker's --as-needed, and libtorch would see
        // no GPU (tch::Cuda::is_available() false on a GPU node: it happened to benches/gpu.rs).
        // Kept for trainbook's own targets; a crate of its own adds the same line to its
        // build.rs (the README says so).
        println!(
            "cargo:rustc-link-arg=-Wl,--push-state,--no-as-needed,-ltorch_cuda,-lc10_cuda,--pop-state"
        );
    }
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib_dir.display());
    println!("cargo:rustc-env=TRAINBOOK_LIBTORCH_LIB={}", lib_dir.display());
}

/// Where Gloo's headers are (the shim includes c10d's ProcessGroupGloo.hpp, which includes
/// gloo/*.h; the torch wheel does not ship them). In order: `$GLOO_INCLUDE_DIR`; the copy that
/// the set-up unpacks without root into `.venv/debs` (`$TRAINBOOK_VENV`, which
/// .cargo/config.toml sets, else `.venv` beside Cargo.toml); Debian's libgloo-dev in /usr/include.
fn gloo_include_dir() -> PathBuf {
    const HEADER: &str = "gloo/config.h";
    if let Some(dir) = env::var_os("GLOO_INCLUDE_DIR").map(PathBuf::from) {
        if !dir.join(HEADER).exists() {
            fail(&format!("GLOO_INCLUDE_DIR={}: no {HEADER} there", dir.display()));
        }
        return dir;
    }
    let checkout_venv =
        Path::new(&env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default()).join(".venv");
    let venv = match env::var_os("TRAINBOOK_VENV").map(PathBuf::from) {
        // Another venv: its headers may differ, so changing the variable reruns this script.
        Some(named) if !same_dir(&named, &checkout_venv) => {
            println!("cargo:rerun-if-env-changed=TRAINBOOK_VENV");
            named
        }
        // Unset, or the checkout's own venv (what .cargo/config.toml sets): the same headers, so
        // a build with the variable and one without (a project outside the checkout that depends
        // on it by path, sharing its target directory) share this script's output instead of
        // each running it and recompiling the crate again. Not watched: a build that later names
        // another venv without changing LIBTORCH keeps these headers until the script reruns.
        _ => checkout_venv,
    };
    let fetched = venv.join("debs/usr/include");
    let system = PathBuf::from("/usr/include");
    for dir in [&fetched, &system] {
        if dir.join(HEADER).exists() {
            // Only existing paths: cargo reruns a build script on every build while a path it
            // watches is missing.
            println!("cargo:rerun-if-changed={}", dir.join(HEADER).display());
            println!("trainbook: Gloo headers from {}", dir.display());
            return dir.clone();
        }
    }
    fail(&format!(
        "Gloo headers ({HEADER}) not found in {} or {}. Either install Debian's libgloo-dev \
         (as root: apt-get install libgloo-dev), or, without root, run `make setup-demo` \
         (scripts/setup/setup.sh), which downloads libgloo-dev from Debian's mirrors (`apt-get \
         download`, or scripts/setup/fetch_debs.py where there is no apt) and unpacks it into \
         {}; or set GLOO_INCLUDE_DIR to a directory holding gloo/config.h",
        fetched.display(),
        system.display(),
        venv.join("debs").display()
    ))
}

/// Whether `a` and `b` name the same directory (through links), or are spelled the same.
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    panic!("{msg}");
}

/// The C++ ABI libtorch was built with: asked from Python like torch-sys does when
/// `LIBTORCH_USE_PYTORCH` is set, otherwise `LIBTORCH_CXX11_ABI` (default 1, as torch-sys).
fn cxx11_abi() -> String {
    if let Ok(abi) = env::var("LIBTORCH_CXX11_ABI") {
        return abi;
    }
    if env::var_os("LIBTORCH_USE_PYTORCH").is_some() {
        println!("cargo:rerun-if-env-changed=VIRTUAL_ENV");
        let python = if env::var_os("VIRTUAL_ENV").is_some() { "python" } else { "python3" };
        let out = Command::new(python)
            .args(["-c", "import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))"])
            .output();
        if let Ok(out) = out {
            let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if text == "0" || text == "1" {
                return text;
            }
        }
        fail("could not ask Python for torch._C._GLIBCXX_USE_CXX11_ABI");
    }
    "1".to_string()
}

/// Include directories for NCCL and the CUDA runtime headers, taken from the pip `nvidia-*`
/// packages beside torch in site-packages (nvidia-nccl-cu13, cuda-toolkit[nvcc,cccl]).
fn cuda_include_dirs(torch_root: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let nvidia = torch_root.parent().map(|p| p.join("nvidia")).unwrap_or_default();
    let wanted = ["nccl.h", "cuda_runtime_api.h"];
    for header in wanted {
        let found = std::fs::read_dir(&nvidia)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path().join("include"))
            .find(|inc| inc.join(header).exists());
        match found {
            Some(dir) if !dirs.contains(&dir) => dirs.push(dir),
            Some(_) => {}
            None => fail(&format!(
                "feature `cuda`: {header} not found under {} (pip cuda-toolkit[nvcc,cccl]==13.0.3 and \
                 nvidia-nccl; `make setup` installs them)",
                nvidia.display()
            )),
        }
    }
    dirs
}
