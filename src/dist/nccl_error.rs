//! What NCCL's errors mean for a trainbook job, and what to do about them: the process group
//! adds the hint to the error of the collective that failed.

/// NCCL's error when two ranks of a group are on the same GPU, with what to do about it.
pub(crate) fn explain_nccl_error(message: String) -> String {
    if message.contains("Duplicate GPU") {
        format!(
            "{message}\nhint: ranks of this job share a GPU, which NCCL refuses: start one rank \
             per GPU, or use the Gloo backend (DistOptions {{ backend: Some(Backend::Gloo), .. }}; \
             Dist::init chooses it by itself when the backend is left unset)"
        )
    } else {
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccls_duplicate_gpu_error_says_what_to_do() {
        let e =
            explain_nccl_error("invalid usage\nDuplicate GPU detected : rank 0 and rank 1".into());
        assert!(e.contains("share a GPU") && e.contains("Backend::Gloo"), "{e}");
        assert_eq!(explain_nccl_error("timeout".into()), "timeout");
    }
}
