//! The result channel protocol: the guest writes text lines
//! `@@NLTB:<token>:<KIND> <args>` to its second serial port.
//!
//! | kind | args | meaning |
//! |---|---|---|
//! | `READY` | | init reached the point of running the scenario (boot time is measured to here) |
//! | `FILE` | `name size sha256` | a file follows, base64 in `D` lines; `name` is relative to `$OUT` |
//! | `D` | base64 text | one chunk of the current file |
//! | `END` | `name` | end of the current file |
//! | `EXIT` | `code` | the scenario's exit status; the last frame |
//!
//! The token is random per run, so stale output from an earlier guest can never be mistaken for
//! this one's. Anything that is not a frame with the right token — kernel messages, carriage
//! returns, a partial line before the marker — is ignored, and every file is checked against its
//! size and SHA-256, so noise that corrupts a frame is reported instead of returning bad data.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::Error;

pub const MARKER: &str = "@@NLTB:";

/// What the guest sent.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Frames {
    pub ready: bool,
    pub files: BTreeMap<String, Vec<u8>>,
    pub exit_status: Option<i32>,
}

struct OpenFile {
    name: String,
    size: usize,
    sha256: String,
    base64: String,
}

/// Parses everything the guest wrote to the result channel.
pub fn parse(text: &str, token: &str) -> Result<Frames, Error> {
    let prefix = format!("{MARKER}{token}:");
    let mut frames = Frames::default();
    let mut open: Option<OpenFile> = None;
    for line in text.lines() {
        // The marker may be preceded by noise on the same line; take the last one so that a
        // frame cut by a newline-less kernel message still parses from its restart.
        let Some(at) = line.rfind(&prefix) else {
            continue;
        };
        let body = line[at + prefix.len()..].trim_end_matches(['\r', ' ']);
        let (kind, args) = body.split_once(' ').unwrap_or((body, ""));
        match kind {
            "READY" => frames.ready = true,
            "FILE" => open = Some(open_file(args)?),
            "D" => match open.as_mut() {
                Some(f) => f.base64.push_str(args.trim()),
                None => return Err(Error::Framing("data frame outside a file".into())),
            },
            "END" => {
                let f = open
                    .take()
                    .ok_or_else(|| Error::Framing(format!("END {args} without FILE")))?;
                let data = close_file(&f)?;
                frames.files.insert(f.name, data);
            }
            "EXIT" => {
                let code = args
                    .trim()
                    .parse()
                    .map_err(|_| Error::Framing(format!("exit status {args:?} is not a number")))?;
                frames.exit_status = Some(code);
            }
            _ => {} // Unknown kinds are left for newer guests' scripts.
        }
    }
    if let Some(f) = open {
        return Err(Error::Framing(format!("file {} was cut off", f.name)));
    }
    Ok(frames)
}

fn open_file(args: &str) -> Result<OpenFile, Error> {
    let parts: Vec<&str> = args.split_whitespace().collect();
    let [name, size, sha] = parts[..] else {
        return Err(Error::Framing(format!("bad FILE frame {args:?}")));
    };
    if !is_relative_path(name) {
        return Err(Error::Framing(format!(
            "file name {name:?} is not a relative path inside $OUT"
        )));
    }
    Ok(OpenFile {
        name: name.to_string(),
        size: size
            .parse()
            .map_err(|_| Error::Framing(format!("bad file size in {args:?}")))?,
        sha256: sha.to_string(),
        base64: String::new(),
    })
}

/// Names become host paths under the output directory: no absolute paths, no `..`, no empty or
/// `.` components, so a guest can never write outside it.
pub fn is_relative_path(name: &str) -> bool {
    !name.is_empty()
        && name
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

fn close_file(f: &OpenFile) -> Result<Vec<u8>, Error> {
    let data = base64_decode(&f.base64)
        .ok_or_else(|| Error::Framing(format!("file {}: corrupted base64", f.name)))?;
    if data.len() != f.size {
        return Err(Error::Framing(format!(
            "file {}: {} bytes received, {} sent",
            f.name,
            data.len(),
            f.size
        )));
    }
    let sum = hex(&Sha256::digest(&data));
    if sum != f.sha256 {
        return Err(Error::Framing(format!(
            "file {}: checksum mismatch",
            f.name
        )));
    }
    Ok(data)
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Standard base64 (RFC 4648 with padding), as busybox `base64` writes it.
pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | value(c)?;
        }
        n <<= 6 * pad as u32;
        let three = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&three[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests;
