//! `--instance NAME`, `--keep-instance`, `--instance-reset` (record and tail): a named
//! ftrace instance that a killed run leaves and the next adopts (docs/restarts.md).

use clap::Args;

use crate::capture::backend::BackendKind;
use crate::capture::ftrace::named::{NamedInstance, check_name};

/// The named-instance flags.
#[derive(Debug, Args)]
pub struct InstanceArgs {
    /// Record through the tracefs instance `instances/NAME` (--backend ftrace): left in
    /// place when uevrec is killed (its events go on recording), adopted by the next run
    /// with the same NAME and recipe, which reads what it kept; removed at a clean stop
    /// (docs/restarts.md).
    #[arg(long, value_name = "NAME")]
    pub instance: Option<String>,
    /// With --instance: leave the instance, its events enabled, at a clean stop too (for
    /// a restart that loses nothing: `systemctl restart`, a rollout).
    #[arg(long, requires = "instance")]
    pub keep_instance: bool,
    /// With --instance: an instance of that name made with other events, filter, --pid,
    /// ring size or context is removed (with the records it holds) and made anew,
    /// instead of refused.
    #[arg(long, requires = "instance")]
    pub instance_reset: bool,
}

impl InstanceArgs {
    /// The named instance asked for, checked against the backend.
    pub fn spec(&self, backend: BackendKind) -> Result<Option<NamedInstance>, String> {
        let Some(name) = &self.instance else {
            return Ok(None);
        };
        if backend != BackendKind::Ftrace {
            return Err(format!(
                "--instance {name} needs --backend ftrace: perf rings die with the process \
                 that opened them, so nothing outlives a killed run to be adopted (add \
                 --backend ftrace)"
            ));
        }
        check_name(name)?;
        Ok(Some(NamedInstance {
            name: name.clone(),
            keep: self.keep_instance,
            reset: self.instance_reset,
        }))
    }
}
