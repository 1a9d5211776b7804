//! `numalens cc`, `numalens c++`, `numalens fortran`: run the real compiler with the
//! instrumentation of the `inst` backend (see `numalens_inst::toolchain`).

use std::os::unix::process::CommandExt;

use anyhow::Result;
pub use numalens_inst::toolchain::Language;
use numalens_inst::toolchain::wrapper_command;

use crate::cli::WrapperArgs;
use crate::exit::ExitWith;

pub fn run(language: Language, args: WrapperArgs) -> Result<()> {
    let mut cmd = wrapper_command(language, &args.args).map_err(|message| ExitWith {
        status: 127,
        message,
    })?;
    // The compiler takes our place: its exit status and signals are the build's.
    let error = cmd.exec();
    let (var, _) = language.compiler_variable();
    Err(ExitWith {
        status: 127,
        message: format!(
            "cannot run the compiler `{}`: {error}; install it or name another one with {var}",
            cmd.get_program().to_string_lossy()
        ),
    }
    .into())
}
