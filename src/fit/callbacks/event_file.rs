//! TensorBoard's event file format, for scalars: a file of TFRecords (length, masked CRC-32C
//! of the length, the bytes, their masked CRC-32C), each holding one `tensorflow.Event`
//! protobuf (`wall_time`, `step`, and a `file_version`, a `summary` of tagged float values or a
//! `session_log`). The messages are declared here with `prost`'s derive, their field numbers
//! as in TensorFlow's `event.proto` and `summary.proto`.
//!
//! No crate fits: `tensorboard-rs` is marked inactive by its author and pulls in image
//! encoding; `syntaxdot-summary` has had no release since 2022. What a scalar log needs is the
//! framing and three small messages.
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use prost::Message;

use crate::{Result, WithPath};

/// `tensorflow.Event` (the fields a scalar log uses).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Event {
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    #[prost(int64, tag = "2")]
    pub step: i64,
    #[prost(oneof = "What", tags = "3, 5, 7")]
    pub what: Option<What>,
}

/// The `what` of an [`Event`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub(crate) enum What {
    /// The first event of a file: `brain.Event:2`.
    #[prost(string, tag = "3")]
    FileVersion(String),
    #[prost(message, tag = "5")]
    Summary(Summary),
    #[prost(message, tag = "7")]
    SessionLog(SessionLog),
}

/// `tensorflow.Summary`: tagged values.
#[derive(Clone, PartialEq, Message)]
pub(crate) struct Summary {
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<SummaryValue>,
}

/// `tensorflow.Summary.Value` with a `simple_value` (a float32 scalar).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct SummaryValue {
    #[prost(string, tag = "1")]
    pub tag: String,
    #[prost(float, optional, tag = "2")]
    pub simple_value: Option<f32>,
}

/// `tensorflow.SessionLog`: `status` 1 is START, which tells TensorBoard to drop the events of
/// earlier files at this step and after (a run restarted from a checkpoint: torch's
/// `SummaryWriter(purge_step=...)`).
#[derive(Clone, PartialEq, Message)]
pub(crate) struct SessionLog {
    #[prost(int32, tag = "1")]
    pub status: i32,
}

/// `SessionLog.START`.
pub(crate) const SESSION_START: i32 = 1;

/// TFRecord's checksum: CRC-32C rotated right by 15 bits plus a constant.
fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// One event file, written record by record.
pub(crate) struct EventFile {
    path: PathBuf,
    out: BufWriter<File>,
}

impl EventFile {
    /// A new file in `dir` named as torch's `SummaryWriter` names them
    /// (`events.out.tfevents.<seconds>.<host>.<pid>.<n>`), starting with the version event.
    pub(crate) fn create(dir: &Path, wall_time: f64) -> Result<EventFile> {
        std::fs::create_dir_all(dir).with_path(dir)?;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        let pid = std::process::id();
        let mut n = 0;
        let path = loop {
            let name = format!("events.out.tfevents.{}.{host}.{pid}.{n}", wall_time as u64);
            let path = dir.join(name);
            if !path.exists() {
                break path;
            }
            n += 1;
        };
        let file = File::create(&path).with_path(&path)?;
        let mut f = EventFile { path, out: BufWriter::new(file) };
        let version = What::FileVersion("brain.Event:2".into());
        f.write(&Event { wall_time, step: 0, what: Some(version) })?;
        Ok(f)
    }

    /// The file's path.
    #[cfg(test)]
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event (buffered until [`flush`](Self::flush)).
    pub(crate) fn write(&mut self, event: &Event) -> Result<()> {
        let data = event.encode_to_vec();
        let len = (data.len() as u64).to_le_bytes();
        let mut record = Vec::with_capacity(data.len() + 16);
        record.extend_from_slice(&len);
        record.extend_from_slice(&masked_crc(&len).to_le_bytes());
        record.extend_from_slice(&data);
        record.extend_from_slice(&masked_crc(&data).to_le_bytes());
        self.out.write_all(&record).with_path(&self.path)
    }

    /// Appends a summary of scalars at `step`.
    pub(crate) fn scalars(
        &mut self,
        wall_time: f64,
        step: u64,
        values: &[(&str, f64)],
    ) -> Result<()> {
        let value = values
            .iter()
            .map(|(tag, v)| SummaryValue { tag: tag.to_string(), simple_value: Some(*v as f32) })
            .collect();
        let what = Some(What::Summary(Summary { value }));
        self.write(&Event { wall_time, step: step as i64, what })
    }

    /// Hands what was written to the operating system (TensorBoard reads it from there).
    pub(crate) fn flush(&mut self) -> Result<()> {
        self.out.flush().with_path(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::manual_rotate)] // spelled out as TFRecord's documentation writes it
    fn the_masked_crc_is_tfrecords() {
        // CRC-32C of "123456789" is 0xE3069283 (the standard check value); masked by hand:
        let crc: u32 = 0xe306_9283;
        assert_eq!(crc32c::crc32c(b"123456789"), crc);
        assert_eq!(masked_crc(b"123456789"), ((crc >> 15) | (crc << 17)).wrapping_add(0xa282_ead8));
    }

    #[test]
    fn records_frame_the_encoded_event_and_decode_back() {
        let dir = tempfile::tempdir().unwrap();
        let mut f = EventFile::create(dir.path(), 1.5e9).unwrap();
        f.scalars(1.5e9 + 1.0, 3, &[("train/loss", 0.25)]).unwrap();
        f.flush().unwrap();
        let bytes = std::fs::read(f.path()).unwrap();
        let mut at = 0;
        let mut events = Vec::new();
        while at < bytes.len() {
            let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
            let crc = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap());
            assert_eq!(crc, masked_crc(&bytes[at..at + 8]));
            let data = &bytes[at + 12..at + 12 + len];
            let crc = u32::from_le_bytes(bytes[at + 12 + len..at + 16 + len].try_into().unwrap());
            assert_eq!(crc, masked_crc(data));
            events.push(Event::decode(data).unwrap());
            at += 16 + len;
        }
        assert_eq!(events[0].what, Some(What::FileVersion("brain.Event:2".into())));
        let Some(What::Summary(s)) = &events[1].what else { panic!("{:?}", events[1]) };
        assert_eq!(
            (events[1].step, s.value[0].tag.as_str(), s.value[0].simple_value),
            (3, "train/loss", Some(0.25))
        );
    }
}
