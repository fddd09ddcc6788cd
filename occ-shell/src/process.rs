//! The one seam for the outside world: every program occ-build starts —
//! nvcc (each job, the `nvcc -E` proofs, the toolkit's `--dryrun`,
//! `--version`), nvdisasm, fatbinary and a host-code library's archiver —
//! and every one cargo-occ starts
//! (ptxas for `sweep`; nvcc, the host compiler and the launcher for
//! `toolkit doctor`; cargo, rustc, pip's check) is described as a [`Cmd`]
//! and run by a [`Programs`] (after sccache's `CommandCreatorSync` and cc's
//! test shim). [`Real`] starts the processes; a build gets another through
//! its environment reader
//! ([`Env::with_programs`](crate::env::Env::with_programs)), such as
//! `cli::Replay` (feature `replay`), which serves nvcc 13.5's recorded
//! outputs so that the rules above the seam (plan, cache, memo, gate) are
//! tested without nvcc.
//!
//! No other module constructs a `std::process::Command` or starts a
//! process (`occ-model/tests/it/seam.rs` checks the sources of occ-build,
//! occ-shell and cargo-occ, and `occ-build/clippy.toml` bans the calls).
//! Two exceptions. cc's own: its probe of the host compiler's family
//! runs inside `cc::Build::try_get_compiler`, and on MSVC targets cc runs
//! `lib.exe` (`hostlib::archive`); every other archive runs the archiver
//! cc names through this seam. The host compiler itself is run by nvcc
//! (`-ccbin`), never by occ-build. And `cargo occ toolkit install`'s pip,
//! whose output goes straight to the terminal while it downloads (a
//! [`Cmd`]'s is caught); pip is no CUDA tool, and the seam test names it
//! with that reason.
//!
//! A leaf: it imports no other module of the crate.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A program to run: its path, arguments, working folder and the
/// variables set or removed on top of this process's environment; stdin
/// is always empty. `writes` names where it leaves files (a folder it
/// writes into, or one file), so that a replay can leave them too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    program: PathBuf,
    args: Vec<OsString>,
    dir: Option<PathBuf>,
    env: Vec<(OsString, Option<OsString>)>,
    writes: Option<PathBuf>,
}

impl Cmd {
    /// A command that runs `program` with no arguments.
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        Cmd {
            program: PathBuf::from(program.as_ref()),
            args: Vec::new(),
            dir: None,
            env: Vec::new(),
            writes: None,
        }
    }

    /// Adds an argument.
    pub fn arg(&mut self, arg: impl AsRef<OsStr>) -> &mut Self {
        self.args.push(arg.as_ref().to_os_string());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(&mut self, args: I) -> &mut Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// Runs it in `dir`.
    pub fn current_dir(&mut self, dir: impl AsRef<Path>) -> &mut Self {
        self.dir = Some(dir.as_ref().to_path_buf());
        self
    }

    /// Sets a variable for it.
    pub fn env(&mut self, name: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> &mut Self {
        self.env.push((
            name.as_ref().to_os_string(),
            Some(value.as_ref().to_os_string()),
        ));
        self
    }

    /// Removes a variable from its environment.
    pub fn env_remove(&mut self, name: impl AsRef<OsStr>) -> &mut Self {
        self.env.push((name.as_ref().to_os_string(), None));
        self
    }

    /// Says where it leaves files: a folder (every file it writes there)
    /// or a file.
    pub fn writes(&mut self, path: impl AsRef<Path>) -> &mut Self {
        self.writes = Some(path.as_ref().to_path_buf());
        self
    }

    /// The program.
    pub fn get_program(&self) -> &Path {
        &self.program
    }

    /// The arguments.
    pub fn get_args(&self) -> &[OsString] {
        &self.args
    }

    /// The working folder, if set.
    pub fn get_dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// The variables set (`Some`) or removed (`None`), in order.
    pub fn get_envs(&self) -> &[(OsString, Option<OsString>)] {
        &self.env
    }

    /// Where it leaves files ([`Cmd::writes`]).
    pub fn get_writes(&self) -> Option<&Path> {
        self.writes.as_deref()
    }

    /// The program and its arguments, as a shell would show them (for
    /// messages).
    pub fn display(&self) -> String {
        std::iter::once(self.program.as_os_str())
            .chain(self.args.iter().map(OsString::as_os_str))
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The `std::process::Command` that runs it, stdin empty.
    #[allow(clippy::disallowed_methods)] // the seam: the one place a process starts
    fn command(&self) -> std::process::Command {
        let mut cmd = std::process::Command::new(&self.program);
        cmd.args(&self.args).stdin(std::process::Stdio::null());
        if let Some(dir) = &self.dir {
            cmd.current_dir(dir);
        }
        for (name, value) in &self.env {
            match value {
                Some(v) => cmd.env(name, v),
                None => cmd.env_remove(name),
            };
        }
        cmd
    }
}

/// How a program ended: its exit code, or the signal that killed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The exit code, when it exited.
    pub code: Option<i32>,
    /// The signal that ended it, when one did (Unix).
    pub signal: Option<i32>,
}

impl Status {
    /// Whether it exited with 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    fn of(status: std::process::ExitStatus) -> Status {
        #[cfg(unix)]
        let signal = std::os::unix::process::ExitStatusExt::signal(&status);
        #[cfg(not(unix))]
        let signal = None;
        Status {
            code: status.code(),
            signal,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit status: {code}"),
            (None, Some(signal)) => write!(f, "signal: {signal}"),
            (None, None) => f.write_str("no exit status"),
        }
    }
}

/// What a finished program gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// How it ended.
    pub status: Status,
    /// Its standard output (empty when it went line by line to
    /// [`Programs::lines`]).
    pub stdout: Vec<u8>,
    /// Its standard error.
    pub stderr: Vec<u8>,
}

/// Runs programs: the one way occ-build and cargo-occ start one.
pub trait Programs: fmt::Debug + Send + Sync {
    /// Runs `cmd` to its end; its status and what it printed. An error
    /// when it could not be started.
    fn output(&self, cmd: &Cmd) -> io::Result<Output>;

    /// Runs `cmd`, handing each line of its standard output to `line` as it
    /// comes (without its line ending); its status and standard error.
    /// nvdisasm's text can be ten times its cubin: [`Real`] never holds it
    /// whole.
    fn lines(&self, cmd: &Cmd, line: &mut dyn FnMut(&str)) -> io::Result<Output> {
        let output = self.output(cmd)?;
        for l in String::from_utf8_lossy(&output.stdout).lines() {
            line(l);
        }
        Ok(Output {
            stdout: Vec::new(),
            ..output
        })
    }

    /// Runs `cmd` with its standard output and error written together to
    /// `log`, not through pipes, so that a hung program (or a child of it
    /// holding a pipe open) cannot block the caller; `stop`, asked every few
    /// milliseconds while it runs, may end it early: then it is killed and
    /// the answer is `Ok(None)`. Otherwise its status. An error when it
    /// could not be started or waited for. For `cargo occ sweep`'s ptxas
    /// runs (a timeout, and the other runs' failure, stop one). The default
    /// (a replay's) writes what [`Programs::output`] gave, stdout then
    /// stderr, and never stops.
    fn until(
        &self,
        cmd: &Cmd,
        mut log: std::fs::File,
        _stop: &mut dyn FnMut() -> bool,
    ) -> io::Result<Option<Status>> {
        let output = self.output(cmd)?;
        log.write_all(&output.stdout)?;
        log.write_all(&output.stderr)?;
        Ok(Some(output.status))
    }
}

/// The programs themselves: each [`Cmd`] runs as a process.
#[derive(Debug, Default, Clone, Copy)]
pub struct Real;

impl Programs for Real {
    fn output(&self, cmd: &Cmd) -> io::Result<Output> {
        let output = cmd.command().output()?;
        Ok(Output {
            status: Status::of(output.status),
            stdout: output.stdout,
            stderr: output.stderr,
        })
    }

    fn lines(&self, cmd: &Cmd, line: &mut dyn FnMut(&str)) -> io::Result<Output> {
        let mut child = cmd
            .command()
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()?;
        let (Some(stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(io::Error::other("no output pipes"));
        };
        let errors = std::thread::scope(|scope| {
            let errors = scope.spawn(move || {
                let mut text = Vec::new();
                let _ = stderr.read_to_end(&mut text);
                text
            });
            let mut reader = BufReader::new(stdout);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let text = String::from_utf8_lossy(&buf);
                        line(text.trim_end_matches(['\n', '\r']));
                    }
                }
            }
            errors.join().unwrap_or_default()
        });
        let status = child.wait()?;
        Ok(Output {
            status: Status::of(status),
            stdout: Vec::new(),
            stderr: errors,
        })
    }

    fn until(
        &self,
        cmd: &Cmd,
        log: std::fs::File,
        stop: &mut dyn FnMut() -> bool,
    ) -> io::Result<Option<Status>> {
        let errors = log.try_clone()?;
        let mut child = cmd.command().stdout(log).stderr(errors).spawn()?;
        let mut pause = Duration::from_millis(2);
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(Some(Status::of(status)));
            }
            if stop() {
                let _ = child.kill();
                let _ = child.wait();
                return Ok(None);
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn a_real_run_gives_status_output_and_lines() {
        let mut cmd = Cmd::new("sh");
        cmd.args([
            "-c",
            "printf 'a\\nb\\r\\n'; echo err >&2; echo \"$X\"; exit 3",
        ])
        .env("X", "x")
        .current_dir("/");
        let out = Real.output(&cmd).expect("run sh");
        assert_eq!(out.status.code, Some(3));
        assert!(!out.status.success());
        assert_eq!(out.stdout, b"a\nb\r\nx\n");
        assert_eq!(out.stderr, b"err\n");
        let mut lines = Vec::new();
        let out = Real
            .lines(&cmd, &mut |l| lines.push(l.to_string()))
            .expect("run sh");
        assert_eq!(lines, ["a", "b", "x"]);
        assert!(out.stdout.is_empty());
        assert_eq!(out.stderr, b"err\n");
        assert_eq!(out.status.to_string(), "exit status: 3");
        // The default `lines` (a replay's) splits the same way.
        #[derive(Debug)]
        struct Whole;
        impl Programs for Whole {
            fn output(&self, cmd: &Cmd) -> io::Result<Output> {
                Real.output(cmd)
            }
        }
        let mut whole = Vec::new();
        Whole
            .lines(&cmd, &mut |l| whole.push(l.to_string()))
            .expect("run sh");
        assert_eq!(whole, lines);
    }

    #[cfg(unix)]
    #[test]
    fn a_run_until_stopped_logs_to_its_file_or_is_killed() {
        let dir = std::env::temp_dir().join(format!("occ-process-until-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch folder");
        let log = dir.join("run.log");
        let mut cmd = Cmd::new("sh");
        cmd.args(["-c", "echo out; echo err >&2; exit 4"]);
        let file = std::fs::File::create(&log).expect("log file");
        let status = Real.until(&cmd, file, &mut || false).expect("run sh");
        assert_eq!(status.map(|s| s.code), Some(Some(4)));
        assert_eq!(std::fs::read_to_string(&log).expect("log"), "out\nerr\n");
        // Stopped: killed long before its sleep ends.
        let mut slow = Cmd::new("sh");
        slow.args(["-c", "sleep 30"]);
        let started = std::time::Instant::now();
        let file = std::fs::File::create(&log).expect("log file");
        let mut asked = 0;
        let stopped = Real
            .until(&slow, file, &mut || {
                asked += 1;
                asked > 2
            })
            .expect("run sh");
        assert_eq!(stopped, None);
        assert!(started.elapsed() < Duration::from_secs(10));
        // The default (a replay's) writes what the program printed.
        #[derive(Debug)]
        struct Whole;
        impl Programs for Whole {
            fn output(&self, cmd: &Cmd) -> io::Result<Output> {
                Real.output(cmd)
            }
        }
        let file = std::fs::File::create(&log).expect("log file");
        let status = Whole.until(&cmd, file, &mut || true).expect("run sh");
        assert_eq!(status.map(|s| s.code), Some(Some(4)));
        assert_eq!(std::fs::read_to_string(&log).expect("log"), "out\nerr\n");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_program_that_is_not_there_is_an_error() {
        let cmd = Cmd::new("/nonexistent/occ-no-such-program");
        assert!(Real.output(&cmd).is_err());
        assert!(Real.lines(&cmd, &mut |_| {}).is_err());
        let log = std::env::temp_dir().join(format!("occ-process-none-{}", std::process::id()));
        let file = std::fs::File::create(&log).expect("log file");
        assert!(Real.until(&cmd, file, &mut || false).is_err());
        let _ = std::fs::remove_file(&log);
    }
}
