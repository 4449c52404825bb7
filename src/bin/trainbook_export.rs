//! trainbook-export: turns an evcxr notebook into a standalone Cargo project.
//!
//!     trainbook-export notebooks/02-mnist-ddp.ipynb OUT_DIR
//!     cargo build --release --manifest-path OUT_DIR/Cargo.toml
//!     torchrun --standalone --nproc-per-node=2 --no-python OUT_DIR/target/release/nb-02-mnist-ddp
use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 2 {
        eprintln!("usage: trainbook-export NOTEBOOK.ipynb OUT_DIR");
        return ExitCode::from(2);
    }
    let (notebook, out) = (PathBuf::from(&args[0]), PathBuf::from(&args[1]));
    let lock = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.lock");
    let result = trainbook::export::export_notebook(&notebook).and_then(|p| {
        let toml =
            trainbook::export::write_project(&p, &out, lock.exists().then_some(lock.as_path()))?;
        p.notes.iter().for_each(|n| println!("note: {n}"));
        println!("wrote {} (package {})", toml.display(), p.name);
        Ok(())
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("trainbook-export: error: {e}");
            ExitCode::FAILURE
        }
    }
}
