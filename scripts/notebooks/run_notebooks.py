#!/usr/bin/env python3
"""Executes trainbook's notebooks headless, top to bottom, in the `trainbook` Jupyter kernel.

    .venv/bin/python scripts/notebooks/run_notebooks.py [NOTEBOOK ...] [--out DIR | --in-place] [--cell-timeout S] [--inject CODE] [--append CODE ...]
    .venv/bin/python scripts/notebooks/run_notebooks.py --check interrupt|spawn

Without arguments it runs every notebooks/*.ipynb in name order, then the two kernel checks
(an interrupt during `Trainer::fit`; `spawn` from a notebook's cells); `--check` runs one of
those checks alone (tests/tooling/notebooks.rs runs each notebook and each check as its own test).
Executed copies (with their outputs) go to --out, default target/notebooks/, where tests can
inspect the pictures they produced; `--in-place` (what `make notebooks` uses) writes them over
the notebooks themselves, so they are committed with their outputs. Every executed code cell records the CRC-32 of its source in its metadata
(`trainbook.source_crc32`): tests/tooling/notebook_outputs.rs uses it to find cells edited since
their outputs were made. Fails on any cell error.

`--inject CODE` runs the notebooks with CODE as a new cell after their cell tagged `parameters`
(papermill's convention): `make test` runs each notebook so, with short settings (fewer epochs,
smaller pictures), and `make test-long` at the settings committed in the notebook.
`--append CODE` (repeatable) runs CODE as new cells after the notebook's last one, with every name
the notebook defined in scope: the long tier runs the answer key's exercise answers
(docs/src/answer-key.md) so.
"""
import argparse
import os
import pathlib
import sys
import time
import zlib

import nbformat
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError

from kernel_output import KernelSession, NotebookRunner

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent


def error_outputs(nb):
    """Cells whose outputs carry an error (evcxr reports compile errors this way too)."""
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                yield index, f"{out.get('ename', '')}: {out.get('evalue', '')}".strip()


def stamp(nb):
    """Records each executed code cell's source CRC-32 and drops nbclient's timing metadata (it
    would change every committed cell on every run)."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.metadata.pop("execution", None)
        if cell.get("execution_count") is not None:
            crc = zlib.crc32(cell.source.encode("utf-8")) & 0xFFFFFFFF
            cell.metadata["trainbook"] = {"source_crc32": f"{crc:08x}"}


def inject_parameters(nb, code, name):
    """Papermill's convention: a new code cell holding `code`, tagged `injected-parameters`, right
    after the cell tagged `parameters` (the notebook's settings), so that the notebook runs with
    other settings while its own cells stay as they are. Returns None or why it cannot."""
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1:
        return f"{name}: --inject needs exactly one cell tagged 'parameters', found {len(tagged)}"
    cell = nbformat.v4.new_code_cell(code)
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(tagged[0] + 1, cell)
    return None


def run_one(path, out_dir, cell_timeout, inject=None, append=()):
    nb = nbformat.read(path, as_version=4)
    if inject is not None:
        failure = inject_parameters(nb, inject, path.name)
        if failure:
            return failure
    for code in append:
        cell = nbformat.v4.new_code_cell(code)
        cell.metadata["tags"] = ["appended"]
        nb.cells.append(cell)
    kernel = nb.metadata.get("kernelspec", {}).get("name", "trainbook")
    try:
        KernelSpecManager().get_kernel_spec(kernel)
    except NoSuchKernel:
        return f"kernel {kernel!r} is not installed: run `make setup` (scripts/setup/setup.sh) first"
    client = NotebookRunner(
        nb,
        kernel_name=kernel,
        timeout=cell_timeout,
        startup_timeout=120,
        allow_errors=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    failure = None
    try:
        client.execute()
    except CellTimeoutError as e:
        failure = f"a cell ran longer than {cell_timeout} s: {str(e)[:500]}"
    except DeadKernelError as e:
        failure = f"the kernel died: {e}"
    except CellExecutionError as e:
        failure = str(e)[-3000:]
    except TimeoutError as e:  # the marker line after the last cell never came
        failure = str(e)
    finally:
        report = client.failed_cell_report() if failure is not None else ""
        if report:  # nbclient's message has the cell's source only: evcxr puts the error in an output
            failure += f"\nwhat the cell showed:\n{report[-6000:]}"
        stamp(nb)
        out_dir.mkdir(parents=True, exist_ok=True)
        if failure is None or out_dir.resolve() != path.parent.resolve():
            nbformat.write(nb, out_dir / path.name)
        else:  # in place: the original stays as it was; the failed run goes to target/ to read
            failed_dir = ROOT / "target" / "notebooks-failed"
            failed_dir.mkdir(parents=True, exist_ok=True)
            nbformat.write(nb, failed_dir / path.name)
    if failure is None:
        errors = list(error_outputs(nb))
        if errors:
            failure = "; ".join(f"cell {i}: {msg}" for i, msg in errors)
    return failure


INTERRUPT_CELLS = [
    ':dep trainbook = { path = "..", default-features = false }',
    "use trainbook::prelude::*;\nuse trainbook::data::TensorDataset;\nlet marker = 41 + 1;",
    # A run far longer than the check waits for; the interrupt must end it after a step.
    """let dist = Dist::single(Device::Cpu);
trainbook::tch::manual_seed(0);
let x = Tensor::randn([2048, 1, 28, 28], (Kind::Float, Device::Cpu));
let y = Tensor::randint(10, [2048], (Kind::Int64, Device::Cpu));
let classes: Vec<String> = (0..10).map(|c| c.to_string()).collect();
let mut train = DataLoader::new(TensorDataset::new(&x, &y, classes.clone())?, 8).num_workers(0);
let mut val = DataLoader::new(TensorDataset::new(&x.narrow(0, 0, 64), &y.narrow(0, 0, 64), classes)?, 64);
let mut vs = VarStore::new(Device::Cpu);
let net = MnistNet::new(&vs.root());
let mut opt = Optimizer::adam(&vs, 1e-3);
let report = Trainer::new(&dist).epochs(1000).out("../target/tmp/kernel-interrupt").resume(false)
    .fit(&mut vs, &net, &mut opt, &mut train, &mut val)?;
println!("fit returned, interrupted by {:?}", report.interrupted.as_ref().map(|i| i.reason.as_str()));""",
    'println!("marker {marker}, report kept: {}", report.interrupted.is_some());',
    # Outside `fit` an interrupt ends the cells' process (fit's handler, kept in the kernel).
    'println!("waiting outside fit"); std::thread::sleep(std::time::Duration::from_secs(600));',
    'println!("a fresh process answers: {}", 6 * 7);',
]


def check_interrupt(timeout=900):
    """A kernel interrupt during `Trainer::fit` stops the run after a step, and the notebook's
    variables (defined before and by the interrupted cell) survive; one outside `fit` ends the
    cell (its process; evcxr starts a fresh one). Returns None or a failure."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="trainbook", startup_timeout=120, cwd=str(ROOT / "notebooks"))
    try:
        session, sent = KernelSession(kc), []

        def interrupt_at(line):
            def interrupt(text):
                if len(sent) < sent_before + 1 and line in text:
                    km.interrupt_kernel()
                    sent.append(True)

            return interrupt

        ids = [session.run(INTERRUPT_CELLS[0], timeout)[0], session.run(INTERRUPT_CELLS[1], timeout)[0]]
        sent_before = 0
        ids.append(session.run(INTERRUPT_CELLS[2], timeout, on_text=interrupt_at("train "))[0])
        ids.append(session.run(INTERRUPT_CELLS[3], timeout)[0])
        sent_before, started = 1, time.monotonic()
        ids.append(session.run(INTERRUPT_CELLS[4], timeout, on_text=interrupt_at("waiting outside fit"))[0])
        waited = time.monotonic() - started
        ids.append(session.run(INTERRUPT_CELLS[5], timeout)[0])
        session.settle()
        outputs = [session.texts[i] for i in ids]
        text = "".join(outputs)
        if 'interrupted by Some("SIGINT")' not in outputs[2]:
            return f"the interrupted run did not report SIGINT:\n{text[-3000:]}"
        if "marker 42, report kept: true" not in outputs[3]:
            return f"the kernel's variables did not survive the interrupt:\n{text[-3000:]}"
        if waited > 300 or "a fresh process answers: 42" not in outputs[5]:
            return f"an interrupt outside fit did not end the cell ({waited:.0f} s):\n{text[-3000:]}"
        print(outputs[2].strip().splitlines()[-2] if len(outputs[2].strip().splitlines()) > 1 else outputs[2].strip())
        return None
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


SPAWN_TRAIN = """fn train(dist: &Dist, lr: f64) -> Result<Vec<f32>> {
    let x = Tensor::randn([32, 1, 28, 28], (Kind::Float, Device::Cpu));
    let y = Tensor::randint(10, [32], (Kind::Int64, Device::Cpu));
    let vs = VarStore::new(dist.device());
    let net = MnistNet::new(&vs.root());
    let ddp = Ddp::wrap(&vs, dist)?;
    let mut opt = Optimizer::sgd(&vs, lr, 0.9);
    let mut loader = DataLoader::new(TensorDataset::new(&x, &y, vec![])?, 4).shuffle(true).num_workers(0).distributed(dist);
    let opts = EpochOptions::default().quiet().hooks(&ddp);
    train_epoch(&net, &mut loader, &mut opt, &CrossEntropyLoss::new(), &opts)?;
    let mut named: Vec<(String, Tensor)> = vs.variables().into_iter().collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let flat: Vec<Tensor> = named.iter().map(|(_, t)| t.detach().flatten(0, -1)).collect();
    Ok(Vec::try_from(Tensor::cat(&flat, 0))?)
}"""

SPAWN_LAUNCH = """trainbook::tch::manual_seed(3);
let weights = spawn(2, |dist| train(dist, lr))?;
let who = if std::env::var("RANK").is_ok() { "processes" } else { "threads" };
if std::env::var("RANK").map_or(true, |r| r == "0") {
    let bits: Vec<String> = weights[0].iter().map(|w| w.to_bits().to_string()).collect();
    std::fs::write(format!("../target/spawn-check/{who}-{lr}.txt"), bits.join(","))?;
}
println!("{who}: lr {lr}, {} weights", weights[0].len());"""


def spawn_cells(lr, dep_path):
    return [
        f':dep trainbook = {{ path = "{dep_path}", default-features = false }}',
        "use trainbook::prelude::*;\nuse trainbook::data::TensorDataset;",
        SPAWN_TRAIN,
        f"let lr = {lr};",
        SPAWN_LAUNCH,
    ]


def check_spawn(timeout=900):
    """A notebook's own closure runs as 2 ranks (`spawn`), and a learning rate changed in a cell
    reaches them: the cells run with lr 0.05, then the `lr` cell is edited to 0.1 and the launch
    cell run again. Each run's rank-0 weights go to target/spawn-check/threads-LR.txt, and the
    notebook as it stands after the edit to target/spawn-check/spawn-check.ipynb, which
    tests/tooling/notebooks.rs exports and runs under torchrun (processes-0.1.txt must equal
    threads-0.1.txt bit for bit). Returns None or a failure."""
    from jupyter_client.manager import start_new_kernel

    out = ROOT / "target" / "spawn-check"
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.txt"):
        old.unlink()
    # As jupyter_server does, tell the kernel which notebook it runs.
    session_file = out / "spawn-check.ipynb"
    session_file.write_text("{}")
    env = dict(os.environ, JPY_SESSION_NAME=str(session_file))
    km, kc = start_new_kernel(kernel_name="trainbook", startup_timeout=120, cwd=str(ROOT / "notebooks"), env=env)
    try:
        session = KernelSession(kc)
        where = 'println!("notebook: {:?}", trainbook::export::current_notebook());'
        for code in spawn_cells(0.05, "..") + ["let lr = 0.1;", SPAWN_LAUNCH, where]:
            _, error = session.run(code, timeout)
            if error:
                printed = "".join(session.texts.values())
                return f"cell failed: {code[:80]!r}: {error}\n{printed[-2000:]}"
        session.settle()
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    printed = "".join(session.texts.values())
    if f'notebook: Some("{session_file}")' not in printed:
        return f"current_notebook() did not find {session_file}:\n{printed[-2000:]}"
    a, b = (out / "threads-0.05.txt"), (out / "threads-0.1.txt")
    if not (a.exists() and b.exists()):
        return f"the launch cells did not write {a} and {b}"
    if a.read_text() == b.read_text():
        return "changing lr in a cell did not change the ranks' weights"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Rust (trainbook)", "language": "rust", "name": "trainbook"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in spawn_cells(0.1, "../..")]
    nbformat.write(nb, out / "spawn-check.ipynb")
    return None


CHECKS = {"interrupt": ("kernel interrupt check", check_interrupt), "spawn": ("notebook spawn check", check_spawn)}


def run_check(name):
    """Runs one of CHECKS, prints "<what>: ok in S s" or "<what>: FAILED ..."; True if it passed."""
    what, check = CHECKS[name]
    start = time.monotonic()
    failure = check()
    seconds = time.monotonic() - start
    if failure:
        print(f"{what}: FAILED after {seconds:.0f} s\n{failure}", flush=True)
        return False
    print(f"{what}: ok in {seconds:.0f} s", flush=True)
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", nargs="*", type=pathlib.Path)
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "target" / "notebooks")
    parser.add_argument("--in-place", action="store_true", help="write the executed notebooks over the originals")
    parser.add_argument("--cell-timeout", type=int, default=1800)
    parser.add_argument("--inject", metavar="CODE",
                        help="run with this code cell inserted after the cell tagged 'parameters' "
                             "(papermill's convention; the executed copy shows it): the short settings of "
                             "`make test` (tests/tooling/notebooks.rs); not with --in-place")
    parser.add_argument("--append", metavar="CODE", action="append", default=[],
                        help="run this code as a new cell after the notebook's last one (repeatable; "
                             "not with --in-place)")
    parser.add_argument("--check", choices=sorted(CHECKS), action="append", default=[],
                        help="run this kernel check alone (no notebooks); may be repeated")
    args = parser.parse_args()
    # The kernels and the programs they start inherit this environment: without a backtrace
    # setting, an error a notebook shows on purpose (04's crashed rank) prints the same lines
    # whatever shell ran the notebooks.
    for name in ("RUST_BACKTRACE", "RUST_LIB_BACKTRACE"):
        os.environ.pop(name, None)
    if args.check:
        return 0 if all(run_check(name) for name in args.check) else 1
    if args.append and args.in_place:
        print("--append writes over nothing: the committed notebooks keep their own cells (drop --in-place)", file=sys.stderr)
        return 2
    if args.inject is not None and args.in_place:
        print("--inject writes over nothing: the committed notebooks keep their own settings (drop --in-place)", file=sys.stderr)
        return 2
    paths = [p.resolve() for p in args.notebooks] or sorted((ROOT / "notebooks").glob("*.ipynb"))
    if not paths:
        print("no notebooks found under notebooks/", file=sys.stderr)
        return 1
    passed, failed = 0, 0
    for path in paths:
        start = time.monotonic()
        print(f"notebook {path.name}: running", flush=True)
        failure = run_one(path, path.parent if args.in_place else args.out, args.cell_timeout, args.inject,
                          args.append)
        seconds = time.monotonic() - start
        if failure:
            failed += 1
            print(f"notebook {path.name}: FAILED after {seconds:.0f} s\n{failure}", flush=True)
        else:
            passed += 1
            print(f"notebook {path.name}: ok in {seconds:.0f} s", flush=True)
    print(f"notebooks: {passed} passed, {failed} failed")
    if failed == 0 and not args.notebooks and not args.in_place:
        if not all(run_check(name) for name in sorted(CHECKS)):
            return 1
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
