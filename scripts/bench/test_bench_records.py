"""Tests of bench_records.py (run by tests/tooling/benchmarks_md.rs: `python3 -m unittest`).

Each bench's JSON below has the layout its bench writes (the `json!` calls at the end of
benches/NAME.rs and benches/gpu.rs), with figures made up for the test: the records are checked
against those figures, and BENCHMARKS.md against the records.
"""
import json
import os
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO

import bench_records as br

TRAIN_STEP = {
    "resnet34": {"trainbook_img_per_s": 16.0, "pytorch_img_per_s": 15.0, "ratio": 16 / 15},
    "resnet34_bf16": {"trainbook_img_per_s": 30.0, "pytorch_img_per_s": 31.0, "ratio": 30 / 31},
    "resnet34_loader": {"trainbook_img_per_s": 17.0, "pytorch_img_per_s": 13.0, "ratio": 17 / 13},
    "cpu_bf16_units": False,
    "mnist_epoch": {"trainbook_s": 3.0, "pytorch_s": 3.6, "speed_ratio": 1.2},
    "mnist_epoch_step_records": {"trainbook_s": 3.2, "pytorch_s": 3.6, "speed_ratio": 1.125},
}
LOADER = {
    "train/workers=0": {"trainbook": 500.0, "torchvision": 250.0, "ratio": 2.0},
    "val/workers=2": {"trainbook": 1800.0, "torchvision": 600.0, "ratio": 3.0},
    "augmix/workers=2": {"trainbook": 900.0, "torchvision": 450.0, "ratio": 2.0},
}
CHECKPOINT = {
    "save": {"trainbook_s": 0.221, "torch_s": 0.211, "time_ratio": 0.221 / 0.211},
    "load": {"trainbook_s": 0.036, "torch_s": 0.139, "time_ratio": 0.036 / 0.139},
    "background_save": {"stall_s": 0.024, "write_s": 0.164, "stall_vs_torch_save": 0.024 / 0.211},
}
DDP = {
    "world2": {"trainbook": 7.0, "pytorch": 7.5, "ratio": 7 / 7.5},
    "world2_accumulate2": {"trainbook": 7.2, "pytorch": 7.4, "ratio": 7.2 / 7.4},
    "world1": {"trainbook": 7.9, "pytorch": 8.0, "ratio": 7.9 / 8},
    "exchange_overhead": {"trainbook": 0.14, "pytorch": 0.09},
}
AUTOCAST = {
    "forward": {"trainbook_s": 0.2, "pytorch_s": 0.21, "speed_ratio": 1.05},
    "precision": "bf16",
    "cpu_bf16_units": True,
    "threads": 2,
}
IMG = lambda x: {"img_per_s": x, "peak_allocated_bytes": 1e9}
GPU = {
    "machine": {"gpu": "NVIDIA H999", "torch": "2.11.0+cu130", "cuda": "13.0", "cudnn": 91900,
                "cpu_cores": 16, "torch_threads": 16},
    "trainbook": "trainbook 0.1.0",
    "resnet34_step": [{
        "batch": 16, "precision": "float32", "trainbook": IMG(1200.0), "pytorch": IMG(800.0),
        "trainbook_graphed": IMG(2200.0), "trainbook_graphed_cudnn_benchmark": IMG(2100.0),
        "pytorch_cudnn_benchmark": IMG(900.0), "pytorch_cuda_graph": IMG(2000.0),
        "pytorch_compile_reduce_overhead": {"error": "not measured: more than 150 s"},
        "speed_ratio": 1.5, "peak_memory_ratio": 1.0, "graphed_vs_pytorch_eager": 2.75,
        "best_vs_best": 1.1,
    }],
    "designsafe_epoch": [{"workers": 4, "trainbook": IMG(800.0), "pytorch": IMG(400.0),
                          "speed_ratio": 2.0, "trainbook_graphed": IMG(1000.0),
                          "graphed_speed_ratio": 2.5}],
    "loader": [{"workers": 4, "trainbook": IMG(840.0), "pytorch": IMG(420.0), "speed_ratio": 2.0}],
}


def quiet(f, *args):
    with redirect_stdout(StringIO()):
        return f(*args)


class Records(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.results = os.path.join(self.dir.name, "results")

    def tearDown(self):
        self.dir.cleanup()

    def bench_json(self, data, name="bench.json"):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            json.dump(data, f)
        return path

    def only_record(self, bench):
        folder = os.path.join(self.results, bench)
        (name,) = os.listdir(folder)
        with open(os.path.join(folder, name)) as f:
            return json.load(f)

    def test_train_step_two_runs(self):
        paths = [self.bench_json(TRAIN_STEP, "a.json"), self.bench_json(TRAIN_STEP, "b.json")]
        quiet(br.record, "train_step", paths, "a note", self.results)
        rec = self.only_record("train_step")
        self.assertEqual(len(rec["runs"]), 2)
        self.assertEqual(rec["machine"], br.cpu_machine())
        self.assertEqual(rec["command"], "cargo bench --bench train_step")
        first = rec["runs"][0]
        self.assertEqual([r["trainbook"] for r in first], [16.0, 30.0, 17.0, 3.0, 3.2])
        self.assertAlmostEqual(first[0]["ratio"], 16 / 15)
        self.assertEqual(first[3]["ratio"], 1.2)  # MNIST: PyTorch's time over trainbook's
        text = br.render(self.results)
        self.assertIn(f"## {br.cpu_machine()['kind']}", text)
        self.assertIn("| run 1: trainbook vs PyTorch | run 2 |", text)
        self.assertIn("| ResNet34 train step, batch 16, 224 px, float32 | 16.00 vs 15.00 img/s (1.07x) |", text)
        self.assertIn("3.00 vs 3.60 s (1.20x)", text)
        self.assertIn("a note", text)

    def test_each_cpu_bench(self):
        for bench, data, cell in [
            ("loader", LOADER, "| val, 2 workers | 1800 vs 600 img/s (3.00x) |"),
            ("loader", LOADER, "| AugMix, 2 workers | 900 vs 450 img/s (2.00x) |"),
            ("checkpoint", CHECKPOINT, "221 vs 211 ms (1.05x)"),
            ("checkpoint", CHECKPOINT, "24 ms (0.11x); the write done after 164 ms"),
            ("ddp", DDP, "| 2 ranks x 1 thread | 7.00 vs 7.50 img/s (0.93x) |"),
            ("ddp", DDP, "14.0% vs 9.0%"),
            ("autocast_step", AUTOCAST, "0.20 vs 0.21 s (1.05x)"),
        ]:
            quiet(br.record, bench, [self.bench_json(data)], "", self.results)
            self.assertIn(cell, br.render(self.results), bench)
        self.assertIn("| what | trainbook vs torchvision |", br.render(self.results))

    def test_gpu(self):
        quiet(br.record, "gpu", [self.bench_json(GPU)], "", self.results)
        rec = self.only_record("gpu")
        self.assertEqual(rec["machine"]["kind"], "NVIDIA H999")
        self.assertEqual(rec["torch"], "2.11.0+cu130")
        text = br.render(self.results)
        for cell in [
            "| batch 16, float32, eager | 1200 vs 800 img/s (1.50x) |",
            "| batch 16, float32, trainbook graphed vs PyTorch eager | 2200 vs 800 img/s (2.75x) |",
            "| batch 16, float32, best vs best (PyTorch's: torch.cuda.graph) | 2200 vs 2000 img/s (1.10x) |",
            "| DesignSafe epoch, the step as a CUDA graph, 4 loader workers | 1000 vs 400 img/s (2.50x) |",
            "| JPEG loader alone, 4 workers, vs torchvision | 840 vs 420 img/s (2.00x) |",
        ]:
            self.assertIn(cell, text)
        # GPU machines come before CPU ones.
        quiet(br.record, "loader", [self.bench_json(LOADER)], "", self.results)
        text = br.render(self.results)
        self.assertLess(text.index("## NVIDIA H999"), text.index(f"## {br.cpu_machine()['kind']}"))

    def test_a_new_run_replaces_the_kinds_record(self):
        quiet(br.record, "loader", [self.bench_json(LOADER)], "", self.results)
        faster = {k: dict(v, trainbook=2 * v["trainbook"]) for k, v in LOADER.items()}
        quiet(br.record, "loader", [self.bench_json(faster)], "", self.results)
        self.assertEqual(self.only_record("loader")["runs"][0][0]["trainbook"], 1000.0)

    def test_bad_input_is_named(self):
        with self.assertRaises(SystemExit) as e:
            br.record("gpu", [self.bench_json({"skipped": "no CUDA GPU"})], "", self.results)
        self.assertIn("skipped (no CUDA GPU)", str(e.exception))
        missing = os.path.join(self.dir.name, "none.json")
        with self.assertRaises(SystemExit) as e:
            br.record("loader", [missing], "", self.results)
        self.assertIn("run `cargo bench --bench loader` first", str(e.exception))
        with self.assertRaises(SystemExit) as e:
            br.record("train_step", [self.bench_json(LOADER)], "", self.results)
        self.assertIn("is not a train_step bench's JSON", str(e.exception))
        with self.assertRaises(SystemExit) as e:
            br.record("nonsense", [], "", self.results)
        self.assertIn("unknown bench 'nonsense'", str(e.exception))

    def test_check_says_when_the_file_differs(self):
        quiet(br.record, "loader", [self.bench_json(LOADER)], "", self.results)
        out = os.path.join(self.dir.name, "BENCHMARKS.md")
        args = ["render", "--results", self.results, "--out", out]
        quiet(br.main, args)
        self.assertEqual(quiet(br.main, args + ["--check"]), 0)
        with open(out, "a") as f:
            f.write("edited by hand\n")
        said = StringIO()
        with redirect_stderr(said):
            self.assertEqual(br.main(args + ["--check"]), 1)
        self.assertIn("differs from the records", said.getvalue())


if __name__ == "__main__":
    unittest.main()
