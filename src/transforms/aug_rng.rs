//! The random streams of augmentation: one per sample ([`aug_rng`]), a pure function of the
//! run's seed, the epoch and the sample's index, and one per batch ([`batch_rng`]) for the batch
//! transforms, so that an augmentation never depends on rank, world size, loader threads or a
//! resume.
use rand::SeedableRng;

/// The random stream of one sample's augmentation (ChaCha8, from the `rand_chacha` crate).
pub type AugRng = rand_chacha::ChaCha8Rng;

/// The augmentation stream of sample `index` (its index in the data set) in `epoch` for a run
/// seeded with `seed`: the same stream on any rank, in any loader thread, after any resume.
pub fn aug_rng(seed: u64, epoch: u64, index: u64) -> AugRng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&epoch.to_le_bytes());
    key[16..24].copy_from_slice(&index.to_le_bytes());
    key[24..].copy_from_slice(b"trainbk1");
    AugRng::from_seed(key)
}

/// The random stream of batch `position` of `epoch` whose first sample is data-set index
/// `first` (batch transforms: [`MixUpCutMix`](super::MixUpCutMix)): the same on any thread and after a resume, and
/// different on each rank (their batches hold different samples).
pub fn batch_rng(seed: u64, epoch: u64, position: u64, first: u64) -> AugRng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&epoch.to_le_bytes());
    key[16..24].copy_from_slice(&position.to_le_bytes());
    key[24..].copy_from_slice(&first.to_le_bytes());
    // A distinct stream from every sample's: ChaCha's stream number.
    let mut rng = AugRng::from_seed(key);
    rng.set_stream(0x6d69_785f_6261_7463); // "mix_batc"
    rng
}
