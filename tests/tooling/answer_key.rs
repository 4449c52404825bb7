//! The instructors' answer key (docs/src/answer-key.md) against the notebooks: every exercise and
//! every "question to check yourself" has its answer there, and each exact answer is a cell
//! (a code block starting `// answer: NOTEBOOK`) with the lines it prints (after "prints", in
//! backticks). [`answers`] reads them; tests/tooling/notebooks.rs runs them after the
//! notebook's last cell (notebook 04 in `make test`, the others in the long tier, at their
//! committed settings) and checks the lines.
use crate::common;

use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// One exact answer: the cell's code and the lines it must print.
pub struct Answer {
    pub code: String,
    pub prints: Vec<String>,
}

fn page() -> String {
    std::fs::read_to_string(Path::new(ROOT).join("docs/src/answer-key.md")).unwrap()
}

/// Every exact answer on the page, with the notebook (file stem) it runs after.
fn all_answers() -> Vec<(String, Answer)> {
    let text = page();
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if !lines[i].starts_with("```rust") {
            i += 1;
            continue;
        }
        let start = i + 1;
        let end = start + lines[start..].iter().position(|l| *l == "```").expect("an open block");
        i = end + 1;
        let Some(notebook) = lines[start].strip_prefix("// answer: ") else { continue };
        let code = lines[start + 1..end].join("\n");
        // The paragraph after the block: "prints `LINE`" (and `LINE`...).
        let after = lines[i..].iter().find(|l| !l.trim().is_empty()).copied().unwrap_or("");
        assert!(after.starts_with("prints `"), "{notebook}: no \"prints\" line after:\n{code}");
        let prints: Vec<String> = after.split('`').skip(1).step_by(2).map(str::to_string).collect();
        found.push((notebook.trim().to_string(), Answer { code, prints }));
    }
    found
}

/// The exact answers to run after `notebook`'s last cell.
pub fn answers(notebook: &str) -> Vec<Answer> {
    all_answers().into_iter().filter(|(n, _)| n == notebook).map(|(_, a)| a).collect()
}

/// The notebook's markdown cells, joined.
fn markdown(stem: &str) -> String {
    let path = Path::new(ROOT).join(format!("notebooks/{stem}.ipynb"));
    let nb: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let cells = nb["cells"].as_array().unwrap();
    let sources =
        cells.iter().filter(|c| c["cell_type"] == "markdown").map(|c| match &c["source"] {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(l) => l.iter().filter_map(|x| x.as_str()).collect(),
            _ => String::new(),
        });
    sources.collect::<Vec<_>>().join("\n")
}

/// How many exercises (the numbered items under "## Exercises") and questions (the question
/// marks of the "Questions to check yourself" paragraph) a notebook has.
fn exercises_and_questions(stem: &str) -> (usize, usize) {
    let text = markdown(stem);
    let exercises = text.split("## Exercises").nth(1).map_or(0, |rest| {
        rest.lines()
            .take_while(|l| !l.starts_with("Next:") && !l.starts_with("This is the last"))
            .filter(|l| l.split_once(". ").is_some_and(|(n, _)| n.parse::<usize>().is_ok()))
            .count()
    });
    let questions = text
        .split("Questions to check yourself:")
        .nth(1)
        .map_or(0, |rest| rest.split("\n\n").next().unwrap_or("").matches('?').count());
    (exercises, questions)
}

#[test]
fn every_exercise_and_question_has_its_answer() {
    let _turn = common::module_turn(module_path!());
    let text = page();
    let mut total = (0, 0);
    // The course's notebooks (00, the set-up check, has no exercises).
    for stem in crate::notebooks::NOTEBOOKS.iter().filter(|n| !n.starts_with("00-")) {
        let (exercises, questions) = exercises_and_questions(stem);
        let heading = format!("## {} ·", &stem[..2]);
        let section = text.split(&heading).nth(1).unwrap_or_else(|| panic!("no section {heading}"));
        let section = section.split("\n## ").next().unwrap();
        for n in 1..=exercises {
            assert!(
                section.contains(&format!("**Exercise {n} ")),
                "{stem}: exercise {n} has no answer"
            );
        }
        assert!(!section.contains(&format!("**Exercise {} ", exercises + 1)), "{stem}: too many");
        assert_eq!(section.matches("**Question: ").count(), questions, "{stem}: questions");
        total = (total.0 + exercises, total.1 + questions);
    }
    // The course's 20 exercises and 13 questions (the notebooks' review counted them so).
    assert_eq!(total, (20, 13));
}

#[test]
fn each_exact_answer_names_a_notebook_and_what_it_prints() {
    let _turn = common::module_turn(module_path!());
    let all = all_answers();
    assert!(all.len() >= 8, "{} exact answers", all.len());
    for (notebook, answer) in &all {
        assert!(
            Path::new(ROOT).join(format!("notebooks/{notebook}.ipynb")).is_file(),
            "an answer names {notebook}, which is not a notebook"
        );
        assert!(!answer.prints.is_empty() && answer.prints.iter().all(|p| !p.is_empty()));
        assert!(answer.code.contains("println!"), "{notebook}: an answer that prints nothing");
    }
}
