//! The c10d shim across real processes: 3 ranks under torchrun (agent-hosted store), 2 ranks from
//! a plain spawner (rank 0 hosts the store), a world of one, and a missing peer that must turn
//! into a clear error within the timeout instead of a hang.
use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::{free_port, run_with_deadline, text, venv_bin, wait_with_deadline};

const CHECK: &str = env!("CARGO_BIN_EXE_c10d-check");

fn assert_rank_lines(stdout: &str, world: usize) {
    for rank in 0..world {
        let needle = format!("c10d-check rank {rank}/{world}");
        let line = stdout
            .lines()
            .find(|l| l.contains(&needle))
            .unwrap_or_else(|| panic!("no line for rank {rank} in:\n{stdout}"));
        let sum = world * (world + 1) / 2;
        assert!(line.contains(&format!("allreduce sum={sum} ok")), "{line}");
        assert!(line.contains("broadcast ok, all_gather ok, barrier ok"), "{line}");
    }
}

#[test]
fn three_ranks_under_torchrun() {
    let _turn = common::module_turn(module_path!());
    let out = run_with_deadline(
        Command::new(venv_bin("torchrun"))
            .args(["--standalone", "--nproc-per-node=3", "--no-python", CHECK])
            .env("OMP_NUM_THREADS", "1"),
        Duration::from_secs(180),
        "torchrun c10d-check",
    );
    assert!(out.status.success(), "torchrun failed\n{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_rank_lines(&stdout, 3);
    assert!(
        stdout.contains("agent store true"),
        "torchrun --standalone hosts the store in its agent:\n{stdout}"
    );
}

fn spawn_rank(rank: usize, world: usize, port: u16, timeout_s: u64) -> std::process::Child {
    Command::new(CHECK)
        .env("RANK", rank.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("WORLD_SIZE", world.to_string())
        .env("LOCAL_WORLD_SIZE", world.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port.to_string())
        .env("TRAINBOOK_DIST_TIMEOUT", timeout_s.to_string())
        .env_remove("TORCHELASTIC_USE_AGENT_STORE")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn two_ranks_from_a_plain_spawner() {
    let _turn = common::module_turn(module_path!());
    let port = free_port();
    let children: Vec<_> = (0..2).map(|rank| spawn_rank(rank, 2, port, 60)).collect();
    let mut stdout = String::new();
    for (rank, child) in children.into_iter().enumerate() {
        let out = wait_with_deadline(child, Duration::from_secs(120), &format!("rank {rank}"));
        assert!(out.status.success(), "rank {rank} failed\n{}", text(&out));
        stdout.push_str(&String::from_utf8_lossy(&out.stdout));
    }
    assert_rank_lines(&stdout, 2);
    assert!(stdout.contains("agent store false"));
}

#[test]
fn world_of_one_without_a_launcher() {
    let _turn = common::module_turn(module_path!());
    let out = run_with_deadline(
        Command::new(CHECK).env_remove("RANK").env_remove("WORLD_SIZE"),
        Duration::from_secs(60),
        "c10d-check alone",
    );
    assert!(out.status.success(), "{}", text(&out));
    assert_rank_lines(&String::from_utf8_lossy(&out.stdout), 1);
}

#[test]
fn a_missing_peer_is_an_error_within_the_timeout() {
    let _turn = common::module_turn(module_path!());
    // Rank 0 of 2 hosts the store; rank 1 never comes. It must give up, not hang.
    let start = Instant::now();
    let child = spawn_rank(0, 2, free_port(), 3);
    let out = wait_with_deadline(child, Duration::from_secs(60), "lonely rank 0");
    let elapsed = start.elapsed();
    assert!(!out.status.success(), "rank 0 should fail without its peer\n{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("c10d-check: error:"), "{stderr}");
    assert!(
        stderr.contains("TCPStore") || stderr.contains("process group"),
        "error should say what was awaited: {stderr}"
    );
    assert!(elapsed < Duration::from_secs(45), "took {elapsed:?}");
}

#[test]
fn a_bad_environment_is_reported() {
    let _turn = common::module_turn(module_path!());
    let out = run_with_deadline(
        Command::new(CHECK)
            .env("RANK", "0")
            .env("WORLD_SIZE", "2")
            .env_remove("MASTER_ADDR")
            .env("MASTER_PORT", "1"),
        Duration::from_secs(30),
        "c10d-check without MASTER_ADDR",
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("MASTER_ADDR is not set"),
        "{}",
        text(&out)
    );
}
