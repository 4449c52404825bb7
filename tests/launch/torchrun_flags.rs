//! Every flag of every example passes through torchrun: `torchrun ... --no-python ./example
//! FLAGS` hands FLAGS to the program untouched. torchrun's parser (argparse, with abbreviations
//! on) reads any argument that starts with `--`, also after the program, and stops with
//! "ambiguous option" when one is a prefix of two of its own options (`--monitor` of
//! `--monitor-interval` and `--monitor_interval`). The flags are read from each example's
//! `--help`; torchrun's own parser (`torch.distributed.run.get_args_parser`, the venv's torch)
//! parses them, alone and as `--flag=value`.
use std::process::Command;
use std::time::Duration;

use crate::common;

const EXAMPLES: [&str; 7] = [
    "mnist",
    "designsafe",
    "tiny_imagenet",
    "dogs",
    "mnist_regression",
    "mnist_two_inputs",
    "classify",
];

/// The long flags an example's `--help` lists (`--help` and `--version` aside).
fn flags_of(example: &str) -> Vec<String> {
    let exe = common::target_exe(&format!("examples/{example}"));
    let out = common::run_with_deadline(
        Command::new(&exe).arg("--help"),
        Duration::from_secs(60),
        &format!("{example} --help"),
    );
    assert!(out.status.success(), "{example} --help failed");
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    // A flag's line starts with it (`  --lr <LR>`, `  -o, --out <DIR>`); descriptions that
    // mention other programs' flags (Slurm's `--signal`) do not.
    let mut flags: Vec<String> = help
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            // `-o, --out <DIR>`: the long name after the short one.
            let line = match line.starts_with('-') && !line.starts_with("--") {
                true => line.get(4..)?,
                false => line,
            };
            line.starts_with("--").then(|| line.split([' ', '=']).next().unwrap_or(line))
        })
        .map(str::to_string)
        .filter(|f| f != "--help" && f != "--version")
        .collect();
    flags.dedup();
    flags
}

const PARSE: &str = r#"
import json, sys
from torch.distributed.run import get_args_parser
flags = json.loads(sys.argv[1])
failed = []
for args in [[f] for f in flags] + [[f + "=1"] for f in flags]:
    try:
        parsed = get_args_parser().parse_args(
            ["--standalone", "--nproc-per-node=2", "--no-python", "./example", *args])
        if parsed.training_script_args != args:
            failed.append(f"{args}: torchrun passed {parsed.training_script_args}")
    except SystemExit:
        failed.append(f"{args}: torchrun's parser refused it (see its message above)")
print(json.dumps(failed))
"#;

#[test]
fn every_example_flag_reaches_the_program_through_torchrun() {
    let _turn = common::module_turn(module_path!());
    let mut all = Vec::new();
    for example in EXAMPLES {
        let flags = flags_of(example);
        assert!(
            flags.len() >= 20,
            "{example}: only {} flags read from --help: {flags:?}",
            flags.len()
        );
        // The examples share `RunArgs`; classify has torchvision's flags instead.
        let marker = if example == "classify" { "--model-ema-steps" } else { "--monitor-metric" };
        assert!(flags.iter().any(|f| f == marker), "{example}: {flags:?}");
        all.extend(flags);
        if example == "classify" {
            // The alias the recipes use (`--wd`'s long form in torchvision).
            all.push("--weight-decay".into());
        }
    }
    all.sort();
    all.dedup();
    let json = serde_json::to_string(&all).unwrap();
    let out = common::run_with_deadline(
        Command::new(common::venv_bin("python")).args(["-c", PARSE, &json]),
        Duration::from_secs(120),
        "torchrun's parser",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let failed: Vec<String> = serde_json::from_slice(
        String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("[]").as_bytes(),
    )
    .unwrap();
    assert!(failed.is_empty(), "flags torchrun does not pass on: {failed:#?}");
}

#[test]
fn torchrun_s_parser_refuses_the_old_monitor_flag_which_stays_an_alias() {
    let _turn = common::module_turn(module_path!());
    // The check above can fail: the old name is what torchrun refused.
    let out = common::run_with_deadline(
        Command::new(common::venv_bin("python")).args(["-c", PARSE, r#"["--monitor"]"#]),
        Duration::from_secs(120),
        "torchrun's parser",
    );
    let failed = String::from_utf8_lossy(&out.stdout);
    assert!(failed.contains("--monitor"), "torchrun accepted --monitor: {failed}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("ambiguous option"));
    // Without torchrun the old name still works.
    let exe = common::target_exe("examples/mnist");
    let out = common::run_with_deadline(
        Command::new(exe).args(["--monitor", "no_such_metric"]),
        Duration::from_secs(60),
        "mnist --monitor",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no_such_metric"), "{err}");
    assert!(!err.contains("unexpected argument"), "--monitor is no longer accepted: {err}");
}
