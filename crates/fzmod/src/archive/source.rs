//! Where archive bytes come from when a reader needs only some of them (a region of a chunked
//! archive): memory, or a file read at offsets. Every read is bounded by the length the
//! source reports, so a forged index cannot make a reader allocate past the archive.

use crate::error::{Error, Result};
use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};

/// Archive bytes readable at offsets.
pub trait ArchiveSource: Sync {
    /// Total bytes of the archive.
    fn len(&self) -> u64;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Exactly `len` bytes from `offset` (`Truncated` past the end).
    fn read_at(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>>;
}

fn past_end(offset: u64, len: usize, total: u64) -> Error {
    Error::Truncated(format!("{len} bytes at offset {offset} lie past the archive's {total} bytes"))
}

impl ArchiveSource for &[u8] {
    fn len(&self) -> u64 {
        <[u8]>::len(self) as u64
    }
    fn read_at(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>> {
        let total = <[u8]>::len(self) as u64;
        let end = offset.checked_add(len as u64).filter(|&e| e <= total);
        match end {
            Some(end) => Ok(Cow::Borrowed(&self[offset as usize..end as usize])),
            None => Err(past_end(offset, len, total)),
        }
    }
}

/// A file read at offsets (its length taken once, when opened).
#[derive(Debug)]
pub struct FileSource {
    file: std::sync::Mutex<std::fs::File>,
    len: u64,
}

impl FileSource {
    pub fn new(file: std::fs::File) -> Result<FileSource> {
        let len = file.metadata()?.len();
        Ok(FileSource { file: std::sync::Mutex::new(file), len })
    }
}

impl ArchiveSource for FileSource {
    fn len(&self) -> u64 {
        self.len
    }
    fn read_at(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>> {
        use std::io::{Read, Seek, SeekFrom};
        if offset.checked_add(len as u64).is_none_or(|e| e > self.len) {
            return Err(past_end(offset, len, self.len));
        }
        let mut buf = vec![0u8; len];
        let mut file = self.file.lock().map_err(|_| Error::Io(std::io::Error::other("file lock poisoned")))?;
        file.seek(SeekFrom::Start(offset))?;
        file.read_exact(&mut buf).map_err(|e| match e.kind() {
            std::io::ErrorKind::UnexpectedEof => past_end(offset, len, self.len),
            _ => Error::Io(e),
        })?;
        Ok(Cow::Owned(buf))
    }
}

/// A source that counts the bytes read through it (what a region decode costs).
pub struct CountingSource<'s> {
    pub inner: &'s dyn ArchiveSource,
    read: AtomicU64,
}

impl<'s> CountingSource<'s> {
    pub fn new(inner: &'s dyn ArchiveSource) -> Self {
        CountingSource { inner, read: AtomicU64::new(0) }
    }
    /// Bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        self.read.load(Ordering::Relaxed)
    }
}

impl ArchiveSource for CountingSource<'_> {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>> {
        self.read.fetch_add(len as u64, Ordering::Relaxed);
        self.inner.read_at(offset, len)
    }
}
