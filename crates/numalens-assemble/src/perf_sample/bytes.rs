//! Reading numbers from a record's bytes in the file's byte order.

/// A record ended before a field it announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncated;

pub struct Bytes<'a> {
    rest: &'a [u8],
    big_endian: bool,
}

impl<'a> Bytes<'a> {
    pub fn new(bytes: &'a [u8], big_endian: bool) -> Self {
        Bytes {
            rest: bytes,
            big_endian,
        }
    }

    pub fn big_endian(&self) -> bool {
        self.big_endian
    }

    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Truncated> {
        if n > self.rest.len() {
            return Err(Truncated);
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Truncated> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }

    pub fn u16(&mut self) -> Result<u16, Truncated> {
        let a = self.array()?;
        Ok(if self.big_endian {
            u16::from_be_bytes(a)
        } else {
            u16::from_le_bytes(a)
        })
    }

    pub fn u32(&mut self) -> Result<u32, Truncated> {
        let a = self.array()?;
        Ok(if self.big_endian {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }

    pub fn u64(&mut self) -> Result<u64, Truncated> {
        let a = self.array()?;
        Ok(if self.big_endian {
            u64::from_be_bytes(a)
        } else {
            u64::from_le_bytes(a)
        })
    }

    pub fn u64_if(&mut self, present: bool) -> Result<Option<u64>, Truncated> {
        if present {
            self.u64().map(Some)
        } else {
            Ok(None)
        }
    }

    pub fn skip_words(&mut self, n: u64) -> Result<(), Truncated> {
        let bytes = n.checked_mul(8).ok_or(Truncated)?;
        self.take(usize::try_from(bytes).map_err(|_| Truncated)?)?;
        Ok(())
    }

    /// A `perf_header_string`: a length, then that many bytes holding a NUL-terminated string.
    pub fn header_string(&mut self) -> Result<String, Truncated> {
        let len = self.u32()? as usize;
        let bytes = self.take(len)?;
        let end = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
        Ok(String::from_utf8_lossy(&bytes[..end]).into_owned())
    }
}
