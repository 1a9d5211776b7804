//! Why a report could not be built.

use numalens_format::FormatError;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnalyzeError {
    /// The profile could not be read; the message names the file.
    #[error(transparent)]
    Format(#[from] FormatError),
    /// `--object NAME` matched no object.
    #[error("no object is named `{name}`{}", near_list(.near))]
    UnknownObject { name: String, near: Vec<String> },
    /// `--thread N` matched no thread.
    #[error("no thread has logical id {id}{}", known_list(.known))]
    UnknownThread { id: u32, known: Vec<u32> },
    /// The communication block size is not a multiple of the page size.
    #[error(
        "block size {block_size} is not a multiple of the profile's page size ({page_size} bytes); use {page_size} or a multiple of it"
    )]
    BlockSize { block_size: u64, page_size: u64 },
    /// The what-if simulation failed.
    #[error("simulating the placement policies: {0}")]
    Simulation(String),
}

fn near_list(near: &[String]) -> String {
    if near.is_empty() {
        "; the profile has no objects".to_string()
    } else {
        let quoted: Vec<String> = near.iter().map(|n| format!("`{n}`")).collect();
        format!("; near matches: {}", quoted.join(", "))
    }
}

fn known_list(known: &[u32]) -> String {
    if known.is_empty() {
        "; the profile has no threads".to_string()
    } else {
        let ids: Vec<String> = known.iter().map(u32::to_string).collect();
        format!("; logical ids in the profile: {}", ids.join(", "))
    }
}

pub type Result<T, E = AnalyzeError> = std::result::Result<T, E>;
