//! The on-disk format of one log segment, and nothing else: a 16-byte header
//! (magic, format version), then records. A record (format 2) is its payload's
//! length (u32, little-endian), a CRC-32 of the rest of the record, its
//! durable mark (u64: how many bytes of this segment were known durable, by a
//! completed `fdatasync`, when the record was written), and the payload: the
//! postcard encoding of one Raft entry, whose first field is the entry's log
//! id. Format 1 (still read, never written) has no durable mark.
//!
//! The durable mark is what lets a reopened log tell a write torn by a crash
//! from damage to acknowledged data: records written after a torn one in the
//! same unsynced group carry a mark at or below it (see [`Damage`]).
//!
//! A segment is named after the index of its first entry (`{index:020}.wal`),
//! so segments sort by name in log order.

use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::types::LogId;

/// The first bytes of every segment.
pub const MAGIC: &[u8; 8] = b"CRLRAFT\n";
/// The format version written after the magic.
pub const VERSION: u32 = 2;
/// The first format, read but no longer written: records without a durable mark.
pub const VERSION_WITHOUT_MARKS: u32 = 1;
/// Bytes before the first record.
pub const HEADER_BYTES: u64 = 16;

/// Bytes before a record's payload in a segment of `version`: its length and
/// CRC, and in format 2 its durable mark.
pub fn record_header_bytes(version: u32) -> usize {
    if version == VERSION_WITHOUT_MARKS {
        8
    } else {
        16
    }
}
/// The largest payload a record may have. Entries are far smaller (a proposal is
/// at most a few MiB); a larger length read back is corruption.
pub const MAX_PAYLOAD_BYTES: u32 = 64 << 20;
/// The file name suffix of segments.
pub const SUFFIX: &str = ".wal";

/// The header of a new segment.
pub fn header() -> [u8; HEADER_BYTES as usize] {
    let mut header = [0u8; HEADER_BYTES as usize];
    header[..8].copy_from_slice(MAGIC);
    header[8..12].copy_from_slice(&VERSION.to_le_bytes());
    header
}

/// The file name of the segment whose first entry is `first_index`.
pub fn file_name(first_index: u64) -> String {
    format!("{first_index:020}{SUFFIX}")
}

/// The first index a segment file name stands for, or `None` for other files.
pub fn first_index_of(file_name: &str) -> Option<u64> {
    let digits = file_name.strip_suffix(SUFFIX)?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// The CRC of a record: over its length, its durable mark (format 2) and its
/// payload.
fn checksum(length: [u8; 4], mark: &[u8], payload: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&length);
    hasher.update(mark);
    hasher.update(payload);
    hasher.finalize()
}

/// Appends the record of `payload` to `out`, in the format written
/// ([`VERSION`]), with durable mark `durable`.
pub fn encode_record(payload: &[u8], durable: u64, out: &mut Vec<u8>) {
    // Callers encode entries far below MAX_PAYLOAD_BYTES; saturating keeps an
    // impossible one from wrapping into a short length (it then fails its CRC).
    let length = u32::try_from(payload.len())
        .unwrap_or(u32::MAX)
        .to_le_bytes();
    let mark = durable.to_le_bytes();
    out.extend_from_slice(&length);
    out.extend_from_slice(&checksum(length, &mark, payload).to_le_bytes());
    out.extend_from_slice(&mark);
    out.extend_from_slice(payload);
}

/// Why a record could not be read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// The bytes end inside the record.
    #[error("the record is cut short: {available} of {needed} bytes")]
    Short {
        /// Bytes needed.
        needed: usize,
        /// Bytes there.
        available: usize,
    },
    /// Its length is impossible.
    #[error("the record claims {0} bytes")]
    Length(u32),
    /// Its bytes are not what was written.
    #[error("the record's checksum does not match")]
    Checksum,
}

/// A record read back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// Its payload.
    pub payload: &'a [u8],
    /// The bytes the whole record takes.
    pub len: usize,
    /// Its durable mark (`None` in format 1).
    pub durable: Option<u64>,
}

/// Reads the record of a segment of `version` at the start of `bytes`.
pub fn decode_record(bytes: &[u8], version: u32) -> Result<Decoded<'_>, RecordError> {
    let header_len = record_header_bytes(version);
    let short = |needed| RecordError::Short {
        needed,
        available: bytes.len(),
    };
    let header = bytes.get(..header_len).ok_or(short(header_len))?;
    let length = [header[0], header[1], header[2], header[3]];
    let crc = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
    let mark = &header[8..];
    let payload_len = u32::from_le_bytes(length);
    if payload_len > MAX_PAYLOAD_BYTES {
        return Err(RecordError::Length(payload_len));
    }
    let total = header_len + payload_len as usize;
    let payload = bytes.get(header_len..total).ok_or(short(total))?;
    if checksum(length, mark, payload) != crc {
        return Err(RecordError::Checksum);
    }
    let durable = (!mark.is_empty()).then(|| {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(mark);
        u64::from_le_bytes(raw)
    });
    Ok(Decoded {
        payload,
        len: total,
        durable,
    })
}

/// The log id at the start of an entry's payload.
pub fn log_id_of(payload: &[u8]) -> Result<LogId, postcard::Error> {
    postcard::take_from_bytes::<LogId>(payload).map(|(id, _)| id)
}

/// Where a record lies in its segment and which entry it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// The entry's log id.
    pub log_id: LogId,
    /// Offset of the record (its header) in the file.
    pub offset: u64,
    /// Bytes of the whole record.
    pub len: u32,
}

/// What a segment holds, read from the start.
#[derive(Debug, Default)]
pub struct Scan {
    /// The segment's format.
    pub version: u32,
    /// Its intact records, in order.
    pub records: Vec<Record>,
    /// Where the intact records end.
    pub end: u64,
    /// The file's length.
    pub file_len: u64,
    /// Why reading stopped before the end of the file, if it did.
    pub damage: Option<Damage>,
}

/// Bytes after the intact records that are not a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// What is wrong with them.
    pub reason: String,
    /// Intact entry records found after them.
    pub records_follow: usize,
    /// Whether a crash explains the damage, so that cutting the segment there
    /// loses nothing a sync made durable: no intact record follows (the torn
    /// write was the last), or every one that follows was written while the
    /// damaged bytes were not yet durable (its durable mark is at or below
    /// them: one unsynced group that the disk persisted out of order). Damage
    /// that a later record says was durable is corruption of acknowledged
    /// data, and so is any in format 1 with records after it.
    pub torn_write: bool,
}

/// Why a segment cannot be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ScanError {
    /// Reading failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It is not a segment of this format.
    #[error("{0}")]
    Header(String),
}

/// Checks a segment's header (`head`, the file's first bytes) and returns its
/// format.
pub fn check_header(head: &[u8], path: &Path) -> Result<u32, ScanError> {
    if head.len() < HEADER_BYTES as usize {
        return Err(ScanError::Header(format!(
            "{} has no complete segment header",
            path.display()
        )));
    }
    if &head[..8] != MAGIC {
        return Err(ScanError::Header(format!(
            "{} is not a corral log segment",
            path.display()
        )));
    }
    let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    if version != VERSION && version != VERSION_WITHOUT_MARKS {
        return Err(ScanError::Header(format!(
            "{} is a log segment of format {version}; this build reads formats \
             {VERSION_WITHOUT_MARKS} and {VERSION}: start the build that wrote it",
            path.display()
        )));
    }
    Ok(version)
}

/// Reads every record of a segment, stopping at the first damaged or incomplete
/// one; what follows it is looked through for intact records, never trusted.
pub fn scan(file: &File, path: &Path) -> Result<Scan, ScanError> {
    let file_len = file.metadata()?.len();
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut head = [0u8; HEADER_BYTES as usize];
    reader.read_exact(&mut head).map_err(|e| {
        ScanError::Header(format!(
            "{} has no complete segment header ({e})",
            path.display()
        ))
    })?;
    let version = check_header(&head, path)?;
    let record_header_len = record_header_bytes(version);
    let mut scan = Scan {
        version,
        end: HEADER_BYTES,
        file_len,
        ..Scan::default()
    };
    let mut buffer = Vec::new();
    let reason = loop {
        if scan.end >= file_len {
            return Ok(scan);
        }
        let remaining = file_len - scan.end;
        let mut record_header = [0u8; 16];
        let record_header = &mut record_header[..record_header_len];
        if remaining < record_header_len as u64 {
            break format!("{remaining} bytes of an unfinished record header");
        }
        reader.read_exact(record_header)?;
        let payload_len = u32::from_le_bytes([
            record_header[0],
            record_header[1],
            record_header[2],
            record_header[3],
        ]);
        let total = record_header_len as u64 + u64::from(payload_len);
        if payload_len > MAX_PAYLOAD_BYTES || total > remaining {
            break format!("a record of {total} bytes where {remaining} remain");
        }
        buffer.clear();
        buffer.extend_from_slice(record_header);
        buffer.resize(total as usize, 0);
        reader.read_exact(&mut buffer[record_header_len..])?;
        let payload = match decode_record(&buffer, version) {
            Ok(record) => record.payload,
            Err(e) => break e.to_string(),
        };
        let log_id = match log_id_of(payload) {
            Ok(id) => id,
            Err(e) => {
                // Intact by its checksum, yet not an entry: not a torn write.
                scan.damage = Some(Damage {
                    reason: format!("a record that is not an entry: {e}"),
                    records_follow: 0,
                    torn_write: false,
                });
                return Ok(scan);
            }
        };
        scan.records.push(Record {
            log_id,
            offset: scan.end,
            len: total as u32,
        });
        scan.end += total;
    };
    let rest = read_from(file, scan.end, file_len)?;
    let after = scan.records.last().map(|r| r.log_id.index);
    let following = entry_records_within(&rest, version, after);
    let torn_write = following.iter().all(|durable| match durable {
        Some(durable) => *durable <= scan.end,
        None => false,
    });
    scan.damage = Some(Damage {
        reason,
        records_follow: following.len(),
        torn_write,
    });
    Ok(scan)
}

/// A file's bytes from `from` to `end`.
fn read_from(file: &File, from: u64, end: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = vec![0u8; end.saturating_sub(from) as usize];
    file.read_exact_at(&mut bytes, from)?;
    Ok(bytes)
}

/// The durable marks of the intact records of entries after `after` (any
/// entry when `None`) that start anywhere in `bytes` past its first byte, in a
/// segment of `version` (`None` marks in format 1).
pub fn entry_records_within(bytes: &[u8], version: u32, after: Option<u64>) -> Vec<Option<u64>> {
    let header_len = record_header_bytes(version);
    (1..bytes.len())
        .filter_map(|at| {
            let candidate = &bytes[at..];
            let length = candidate.get(..4)?;
            let length = u32::from_le_bytes([length[0], length[1], length[2], length[3]]);
            if length == 0 || header_len + length as usize > candidate.len() {
                return None;
            }
            let record = decode_record(candidate, version).ok()?;
            let id = log_id_of(record.payload).ok()?;
            after.is_none_or(|a| id.index > a).then_some(record.durable)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sort_in_log_order_and_other_files_are_not_segments() {
        assert_eq!(file_name(42), "00000000000000000042.wal");
        assert_eq!(first_index_of(&file_name(42)), Some(42));
        assert_eq!(first_index_of(&file_name(u64::MAX)), Some(u64::MAX));
        assert!(file_name(9) < file_name(10));
        for other in [
            "42.wal",
            "00000000000000000042.tmp",
            "x0000000000000000042.wal",
        ] {
            assert_eq!(first_index_of(other), None, "{other}");
        }
    }

    #[test]
    fn a_record_reads_back_and_any_flipped_byte_is_caught() {
        let mut bytes = Vec::new();
        encode_record(b"payload", 4096, &mut bytes);
        assert_eq!(
            decode_record(&bytes, VERSION),
            Ok(Decoded {
                payload: &b"payload"[..],
                len: bytes.len(),
                durable: Some(4096),
            })
        );
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 0x20;
            assert!(
                decode_record(&damaged, VERSION).is_err(),
                "flip at {at} went unseen"
            );
        }
        assert!(matches!(
            decode_record(&bytes[..bytes.len() - 1], VERSION),
            Err(RecordError::Short { .. })
        ));
    }

    #[test]
    fn a_format_1_record_reads_back_without_a_mark() {
        // length, CRC over length and payload, payload: as format 1 wrote it.
        let payload = b"payload";
        let length = (payload.len() as u32).to_le_bytes();
        let mut bytes = length.to_vec();
        bytes.extend_from_slice(&checksum(length, &[], payload).to_le_bytes());
        bytes.extend_from_slice(payload);
        let record = decode_record(&bytes, VERSION_WITHOUT_MARKS).expect("reads");
        assert_eq!(record.payload, payload);
        assert_eq!(record.durable, None);
        assert!(decode_record(&bytes, VERSION).is_err());
    }
}
