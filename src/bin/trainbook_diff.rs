//! trainbook-diff RUN_A RUN_B: compares the weight trails of two runs (`Trainer::weight_trail`,
//! the examples' `--weight-trail N`; RUN is the run's output folder or its `weight_trail.jsonl`)
//! and says where they part: which header fields differ (the program's build, the world size,
//! the seed, the config, the data's sizes), then the first step both recorded whose checksums
//! differ, with the first tensor (in name order) that differs there. Exit status, as diff's:
//! 0 when the headers and every step both recorded are equal, 1 when they differ, 2 on an error.
//!
//!     trainbook-diff runs/a runs/b
use std::process::ExitCode;

use trainbook::trail::{compare, read_trail};

const USAGE: &str =
    "usage: trainbook-diff RUN_A RUN_B  (a run's output folder or its weight_trail.jsonl)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let [a, b] = args.as_slice() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let trails = read_trail(a).and_then(|ta| Ok((ta, read_trail(b)?)));
    let (ta, tb) = match trails {
        Ok(t) => t,
        Err(e) => {
            eprintln!("trainbook-diff: {e}");
            return ExitCode::from(2);
        }
    };
    println!("A: {a} ({} steps recorded)", ta.steps.len());
    println!("B: {b} ({} steps recorded)", tb.steps.len());
    let found = compare(&ta, &tb);
    print!("{found}");
    if found.first_difference.is_some() || !found.header_differences.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
