//! `numalens recover`: the profile of a recording whose recorder was killed.

use anyhow::Result;
use numalens_record::recover::{RecoverError, recover};

use crate::cli::RecoverArgs;
use crate::exit::UsageError;

pub fn run(args: RecoverArgs) -> Result<()> {
    let recovered = match recover(&args.dir) {
        Ok(r) => r,
        // The directory given is not one to recover: the command line must change.
        Err(e @ (RecoverError::NotARecording(_) | RecoverError::Finished(_))) => {
            return Err(UsageError(e.to_string()).into());
        }
        Err(e) => return Err(e.into()),
    };
    let s = &recovered.summary;
    eprintln!(
        "numalens: recovered {} samples, {} objects, {} threads{}",
        s.samples,
        s.objects,
        s.threads,
        if s.exact_pages > 0 {
            format!(", {} exactly counted thread pages", s.exact_pages)
        } else {
            String::new()
        }
    );
    eprintln!(
        "numalens: the profile is marked incomplete: {}",
        s.reasons.join("; ")
    );
    eprintln!(
        "numalens: profile written to {}",
        recovered.profile.display()
    );
    Ok(())
}
