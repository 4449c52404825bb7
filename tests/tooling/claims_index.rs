//! The claims page is the index of every exact claim: a sentence of the README or the book that
//! says "bit for bit", "byte for byte", "exact" or "equal to" must name a test that a row of
//! docs/src/claims.md names, or link that page. (What the rows' tests assert is checked by
//! tests/tooling/docs_claims.rs.)
use crate::common;
use crate::docs_claims::{documents, prose};

/// Pages whose "exact" sentences are held elsewhere: the claims page itself, and the answer key,
/// whose exact answers its own test runs (tests/tooling/answer_key.rs).
const NOT_INDEXED: [&str; 3] =
    ["docs/src/claims.md", "docs/src/answer-key.md", "docs/src/SUMMARY.md"];

/// Words that contain an exactness word but name a thing instead of claiming one.
const NAMES: [&str; 1] = [
    // multi-label subset accuracy's usual name
    "exact-match ratio",
];

/// The sentences of a text (whitespace made single; split after `.`, `!` or `?` followed by a
/// space, and at table rows).
fn sentences(text: &str) -> Vec<String> {
    let flat = prose(text).replace("\n|", "\n\n|");
    let mut found = Vec::new();
    for paragraph in flat.split("\n\n") {
        let one = paragraph.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut start = 0;
        let bytes = one.as_bytes();
        for i in 0..bytes.len() {
            let end = matches!(bytes[i], b'.' | b'!' | b'?')
                && bytes.get(i + 1) == Some(&b' ')
                && bytes.get(i + 2).is_some_and(|c| c.is_ascii_uppercase() || *c == b'`');
            if end {
                found.push(one[start..=i].to_string());
                start = i + 2;
            }
        }
        found.push(one[start..].to_string());
    }
    found
}

fn says_exact(sentence: &str) -> bool {
    let mut lower = sentence.to_lowercase();
    for name in NAMES {
        lower = lower.replace(name, "");
    }
    let exact_word = lower.match_indices("exact").any(|(i, _)| {
        let before = lower[..i].chars().next_back();
        let after = lower[i + 5..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric()) && !after.is_some_and(|c| c.is_alphanumeric())
    });
    exact_word || ["bit for bit", "byte for byte", "equal to"].iter().any(|p| lower.contains(p))
}

/// The test paths a text names (`tests/...rs|py`, `src/.../tests.rs`).
fn tests_named(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|s| {
            (s.starts_with("tests/") || (s.starts_with("src/") && s.ends_with("tests.rs")))
                && (s.ends_with(".rs") || s.ends_with(".py"))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn every_exactness_sentence_names_a_test_the_claims_page_lists() {
    let _turn = common::module_turn(module_path!());
    let docs = documents();
    let claims = &docs.iter().find(|(p, _)| p == "docs/src/claims.md").unwrap().1;
    let rows: Vec<&str> = claims.lines().filter(|l| l.starts_with("| ")).collect();
    let listed = |test: &String| rows.iter().any(|r| r.contains(&format!("`{test}`")));
    let (mut seen, mut missing) = (0, Vec::new());
    for (path, text) in &docs {
        if NOT_INDEXED.contains(&path.as_str()) {
            continue;
        }
        for sentence in sentences(text).into_iter().filter(|s| says_exact(s)) {
            seen += 1;
            let linked = sentence.contains("claims.md");
            if !linked && !tests_named(&sentence).iter().any(listed) {
                missing.push(format!("{path}: {sentence}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "sentences saying something is exact without a test listed in docs/src/claims.md (name \
         the test in the sentence and give it a row there):\n{}",
        missing.join("\n")
    );
    // The README and the book say so in about 70 sentences; far fewer means the scan broke.
    assert!(seen >= 50, "only {seen} exactness sentences found");
}

#[test]
fn the_scan_finds_exactness_and_ignores_names() {
    let _turn = common::module_turn(module_path!());
    let text = "Loss is exact over ranks. It ends bit for bit (`tests/fit/a.rs`).\n\n| a | b equal to c |\n\nThe exact-match ratio. Exactly one. Inexact.";
    let found: Vec<String> = sentences(text).into_iter().filter(|s| says_exact(s)).collect();
    assert_eq!(
        found,
        [
            "Loss is exact over ranks.",
            "It ends bit for bit (`tests/fit/a.rs`).",
            "| a | b equal to c |"
        ]
    );
    assert_eq!(tests_named(&found[1]), ["tests/fit/a.rs"]);
}
