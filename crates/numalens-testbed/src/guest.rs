//! Booting a guest and running one scenario in it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};

use crate::error::console_tail;
use crate::framing::{self, MARKER, hex};
use crate::initramfs::Archive;
use crate::qemu::{self, Channels, QEMU};
use crate::spec::GuestSpec;
use crate::{Error, host};

/// Where the guest finds what the host expects its sysfs to show (see
/// [`GuestSpec::expected_sysfs`]).
pub const EXPECTED_SYSFS: &str = "/etc/numalens-vm/expected-sysfs.txt";

/// How long a boot may take to reach init. Guests reach it in about 6 s, 15 s on a loaded
/// host; an emulated boot that has not got there in a minute has hung in the kernel (seen
/// as soft lockups under TCG), which says nothing about the scenario, so it is booted again.
pub const BOOT_DEADLINE: Duration = Duration::from_secs(60);

/// Boots tried before a hang before init is reported as an error.
pub const BOOT_ATTEMPTS: u32 = 3;

/// A shell script run by busybox `sh` in the guest. It writes result files to `$OUT`; they
/// come back in [`GuestOutcome::files`], and its exit status in [`GuestOutcome::exit_status`].
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub script: String,
}

impl Scenario {
    pub fn from_script(name: &str, script: &str) -> Scenario {
        Scenario {
            name: name.to_string(),
            script: script.to_string(),
        }
    }

    pub fn from_file(path: &Path) -> Result<Scenario, Error> {
        let script = std::fs::read_to_string(path)
            .map_err(Error::io(format!("reading scenario {}", path.display())))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "scenario".into());
        Ok(Scenario { name, script })
    }
}

/// What a finished guest left.
#[derive(Debug, Clone)]
pub struct GuestOutcome {
    pub exit_status: i32,
    /// Files the scenario wrote to `$OUT` and its subdirectories, by path relative to `$OUT`
    /// (`scenario.log`, `run.numalens/meta.json`); `scenario.log` holds its output.
    pub files: BTreeMap<String, Vec<u8>>,
    pub console_log: String,
    /// From QEMU's start to the guest's init reaching the scenario.
    pub boot_time: Option<Duration>,
    /// From QEMU's start to its exit.
    pub wall_time: Duration,
    /// Console log, result channel and `qemu-cmd.sh` (to rerun by hand) are kept here.
    pub work_dir: PathBuf,
}

impl GuestOutcome {
    pub fn file_text(&self, name: &str) -> Option<String> {
        self.files
            .get(name)
            .map(|d| String::from_utf8_lossy(d).into_owned())
    }

    pub fn console_tail(&self) -> String {
        console_tail(&self.console_log)
    }
}

/// A guest ready to boot.
#[derive(Debug, Clone)]
pub struct Guest {
    pub spec: GuestSpec,
    /// Where to keep the run's logs; a fresh directory under the system temp dir by default.
    pub work_dir: Option<PathBuf>,
}

impl Guest {
    pub fn new(spec: GuestSpec) -> Guest {
        Guest {
            spec,
            work_dir: None,
        }
    }

    /// Boots the guest, runs `scenario` and returns once the guest has powered off. A guest
    /// that does not finish within the spec's timeout is killed ([`Error::Timeout`]).
    pub fn run(&self, scenario: &Scenario) -> Result<GuestOutcome, Error> {
        host::ensure_tools()?;
        let kernel = crate::kernel::kernel()?;
        let token = new_token();
        let archive = self.archive(scenario)?;
        let initrd = host::cache_by_content("initramfs", "cpio", &archive.to_cpio())?;
        let work = self.prepare_work_dir(&scenario.name)?;
        let console = work.join("console.log");
        let results = work.join("results.txt");
        let ch = Channels {
            console_log: &console,
            results: &results,
            token: &token,
        };
        let args = qemu::qemu_args(&self.spec, &kernel, &initrd, &ch);
        let _ = std::fs::write(
            work.join("qemu-cmd.sh"),
            format!("#!/bin/sh\n{}\n", qemu::shell_command(&args)),
        );
        let mut attempt = 1;
        let (start, boot_time, qemu_stderr) = loop {
            match self.boot_once(&args, &results, &console, &token) {
                Err(Error::BootHang { console_tail, .. }) if attempt < BOOT_ATTEMPTS => {
                    eprintln!(
                        "# {}/{}: guest did not reach init within {BOOT_DEADLINE:?} \
                         (boot {attempt} of {BOOT_ATTEMPTS}), booting again; console tail:\n{}",
                        self.spec.name,
                        scenario.name,
                        indent(&console_tail)
                    );
                    attempt += 1;
                }
                other => break other?,
            }
        };
        let wall_time = start.elapsed();
        let console_log = read_lossy(&console);
        let frames = framing::parse(&read_lossy(&results), &token)?;
        let Some(exit_status) = frames.exit_status else {
            let reason = if frames.ready {
                "the scenario did not finish: guest crashed or powered off early".to_string()
            } else {
                format!(
                    "the guest never reached init; qemu said: {}",
                    qemu_stderr.trim()
                )
            };
            return Err(Error::NoExitStatus {
                reason,
                console_tail: console_tail(&console_log),
            });
        };
        Ok(GuestOutcome {
            exit_status,
            files: frames.files,
            console_log,
            boot_time,
            wall_time,
            work_dir: work,
        })
    }

    /// Clears the logs of any earlier boot, starts QEMU once and waits for it; returns the start
    /// instant, the boot time and QEMU's standard error.
    fn boot_once(
        &self,
        args: &[String],
        results: &Path,
        console: &Path,
        token: &str,
    ) -> Result<(Instant, Option<Duration>, String), Error> {
        for f in [results, console] {
            let _ = std::fs::remove_file(f);
        }
        let start = Instant::now();
        let child = Command::new(QEMU)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(Error::io("starting qemu-system-x86_64"))?;
        let (boot_time, stderr) = self.wait(child, start, results, console, token)?;
        Ok((start, boot_time, stderr))
    }

    /// Polls QEMU until it exits or times out; notes when READY appears on the result channel.
    /// A guest that has not reached init by [`BOOT_DEADLINE`] is killed with
    /// [`Error::BootHang`], so that the caller can boot it again.
    fn wait(
        &self,
        mut child: Child,
        start: Instant,
        results: &Path,
        console: &Path,
        token: &str,
    ) -> Result<(Option<Duration>, String), Error> {
        let ready = format!("{MARKER}{token}:READY");
        let mut boot_time = None;
        loop {
            if boot_time.is_none() && read_lossy(results).contains(&ready) {
                boot_time = Some(start.elapsed());
            }
            if child
                .try_wait()
                .map_err(Error::io("waiting for qemu"))?
                .is_some()
            {
                break;
            }
            if boot_time.is_none() && start.elapsed() > BOOT_DEADLINE.min(self.spec.timeout) {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::BootHang {
                    deadline: BOOT_DEADLINE,
                    attempts: BOOT_ATTEMPTS,
                    console_tail: console_tail(&read_lossy(console)),
                });
            }
            if start.elapsed() > self.spec.timeout {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Timeout {
                    timeout: self.spec.timeout,
                    console_tail: console_tail(&read_lossy(console)),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut stderr = String::new();
        if let Some(mut e) = child.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut stderr);
        }
        Ok((boot_time, stderr))
    }

    fn prepare_work_dir(&self, scenario: &str) -> Result<PathBuf, Error> {
        let dir = match &self.work_dir {
            Some(d) => d.clone(),
            None => std::env::temp_dir().join(format!(
                "numalens-vm-{}-{scenario}-{}",
                self.spec.name,
                &new_token()[..8]
            )),
        };
        std::fs::create_dir_all(&dir).map_err(Error::io(format!("creating {}", dir.display())))?;
        Ok(dir)
    }

    /// The initramfs contents for one run.
    pub fn archive(&self, scenario: &Scenario) -> Result<Archive, Error> {
        let mut a = Archive::new();
        a.add_host_file(Path::new(host::BUSYBOX), "/bin/busybox")?;
        for bin in &self.spec.binaries {
            a.add_binary(bin, self.spec.strip_binaries)?;
        }
        for lib in &self.spec.libraries {
            a.add_library(lib)?;
        }
        for (src, dst) in &self.spec.files {
            a.add_host_file(src, dst)?;
        }
        a.add_bytes(
            EXPECTED_SYSFS,
            self.spec.expected_sysfs().into_bytes(),
            false,
        );
        a.add_bytes("/scenario.sh", scenario.script.clone().into_bytes(), true);
        a.add_bytes("/init", init_script(&self.spec).into_bytes(), true);
        Ok(a)
    }
}

/// The guest's `/init`: mounts, kernel settings, then the scenario, then files and exit status
/// on the result channel (ttyS1), then power off.
pub fn init_script(spec: &GuestSpec) -> String {
    let mut s = String::from(INIT_HEAD);
    // Scenarios check that the settings they were written for are in effect.
    s.push_str(&format!(
        "export NLVM_THP={} NLVM_NUMA_BALANCING={} NLVM_NODES={}\n",
        spec.thp.sysfs_value(),
        spec.numa_balancing,
        spec.nodes.len()
    ));
    s.push_str(&format!(
        "set_knob /sys/kernel/mm/transparent_hugepage/enabled {}\n",
        spec.thp.sysfs_value()
    ));
    s.push_str(&format!(
        "set_knob /proc/sys/kernel/numa_balancing {}\n",
        spec.numa_balancing
    ));
    for (k, v) in &spec.balancing_tunables {
        s.push_str(&format!(
            "set_knob /sys/kernel/debug/sched/numa_balancing/{k} {v}\n"
        ));
    }
    s.push_str(INIT_TAIL);
    s
}

const INIT_HEAD: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
stty -F /dev/ttyS1 raw -echo 2>/dev/null
TOKEN=$(sed -n 's/.*nltb\.token=\([0-9a-f]*\).*/\1/p' /proc/cmdline)
# A knob that cannot be set fails the run: a test must not silently run with other settings.
KNOB_ERRORS=0
set_knob() {
    if ! echo "$2" > "$1" 2>/dev/null; then
        echo "testbed: cannot set $1 to $2" > /dev/ttyS0
        KNOB_ERRORS=1
    fi
}
"#;

const INIT_TAIL: &str = r#"R=/dev/ttyS1
emit() { echo "@@NLTB:$TOKEN:$*" > $R; }
send() {
    n=${1#/out/}
    s=$(($(wc -c < "$1")))
    h=$(sha256sum "$1")
    {
        echo "@@NLTB:$TOKEN:FILE $n $s ${h%% *}"
        base64 "$1" | sed "s/^/@@NLTB:$TOKEN:D /"
        echo "@@NLTB:$TOKEN:END $n"
    } > $R
}
export OUT=/out
emit READY
cd /tmp
if [ "$KNOB_ERRORS" = 0 ]; then
    { sh /scenario.sh 2>&1; echo $? > /tmp/.status; } | tee /out/scenario.log > /dev/ttyS0
    status=$(cat /tmp/.status)
else
    status=125
fi
# Subdirectories too (a profile is a directory); names are paths relative to $OUT.
find /out -type f | while read -r f; do send "$f"; done
emit EXIT "$status"
sync
poweroff -f
"#;

fn read_lossy(path: &Path) -> String {
    std::fs::read(path)
        .map(|d| String::from_utf8_lossy(&d).into_owned())
        .unwrap_or_default()
}

/// A token unique to this run (time, process, a counter), so no stale output is ever taken
/// for this run's.
fn new_token() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    let seed = format!(
        "{now}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    hex(&Sha256::digest(seed.as_bytes()))[..16].to_string()
}

/// Indents every line of `text`, so a console tail stands apart from the test's own lines.
fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
