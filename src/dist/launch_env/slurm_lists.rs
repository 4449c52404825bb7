//! Slurm's compressed list syntaxes, as `srun` puts them in the environment: host lists
//! (`node[01-04,07],gpu5`) and per-node task counts (`2(x3),1`).

/// Slurm's compressed per-node counts: `2(x3),1` means 2, 2, 2, 1.
pub(super) fn tasks_on_node(spec: &str, node: usize) -> Option<usize> {
    let mut seen = 0;
    for item in spec.split(',') {
        let (count, repeat) = match item.split_once("(x") {
            Some((c, r)) => {
                (c.trim().parse().ok()?, r.trim_end_matches(')').parse::<usize>().ok()?)
            }
            None => (item.trim().parse().ok()?, 1),
        };
        if node < seen + repeat {
            return Some(count);
        }
        seen += repeat;
    }
    None
}

/// The first host of a Slurm host list: `node[01-04,07],gpu5` -> `node01`,
/// `rack[1-2]-n[003-004]` -> `rack1-n003`. Zero padding is kept, as Slurm does.
pub fn first_host(list: &str) -> Option<String> {
    let mut host = String::new();
    let mut chars = list.trim().chars();
    while let Some(c) = chars.next() {
        match c {
            ',' => break,
            '[' => {
                let group: String = chars.by_ref().take_while(|&c| c != ']').collect();
                let first = group.split(',').next()?.split(['-', ':']).next()?.trim();
                if first.is_empty() {
                    return None;
                }
                host.push_str(first);
            }
            c => host.push(c),
        }
    }
    (!host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_lists() {
        assert_eq!(first_host("node[01-04,07],gpu5").as_deref(), Some("node01"));
        assert_eq!(first_host("nid001,nid002").as_deref(), Some("nid001"));
        assert_eq!(first_host("rack[1-2]-n[003-004]").as_deref(), Some("rack1-n003"));
        assert_eq!(first_host("c[7,9]").as_deref(), Some("c7"));
        assert_eq!(first_host("login1").as_deref(), Some("login1"));
        assert_eq!(first_host(""), None);
        assert_eq!(first_host("n[]"), None);
    }

    #[test]
    fn slurm_tasks_per_node() {
        assert_eq!(tasks_on_node("2(x3),1", 0), Some(2));
        assert_eq!(tasks_on_node("2(x3),1", 2), Some(2));
        assert_eq!(tasks_on_node("2(x3),1", 3), Some(1));
        assert_eq!(tasks_on_node("4", 1), None);
        assert_eq!(tasks_on_node("x", 0), None);
    }
}
