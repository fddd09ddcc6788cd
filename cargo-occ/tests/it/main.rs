//! cargo-occ's integration tests: the `cargo-occ` binary run as a process
//! over real builds, one module per command or subject, in one test binary.
//! `cargo test -p cargo-occ --test it <module>::` runs one module. Every
//! test runs the binary through [`occ`].

mod calc;
mod checked_files;
mod ci_formats;
mod cli_robustness;
mod explain;
mod first_page;
mod gate_cli;
mod parse;
mod report_golden;
mod sweep;
mod toolkit;
mod tune;

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What a `cargo occ` run gave.
#[derive(Debug)]
pub(crate) struct Ran {
    /// The exit code (-1 when a signal ended it).
    pub code: i32,
    /// Its stdout.
    pub out: String,
    /// Its stderr.
    pub err: String,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Whether [`Setup::kill_after`] ran out and the runner killed it.
    pub killed: bool,
}

impl Ran {
    /// The exit code, stdout and stderr.
    pub fn parts(self) -> (i32, String, String) {
        (self.code, self.out, self.err)
    }

    /// The exit code, and stdout, a newline and stderr as one text.
    pub fn code_and_text(self) -> (i32, String) {
        (self.code, format!("{}\n{}", self.out, self.err))
    }
}

/// The one way these tests run the binary: `cargo occ ARGS` as cargo runs
/// the subcommand (`cargo-occ occ ARGS`, by `occ_tests::cargo_occ`: no `CI`,
/// no `GITHUB_ACTIONS`) in `dir`, with `env` set (`None`: removed) on top,
/// and `stdin` as its input (closed at once when `None`). It prints the
/// command and what it wrote, which the harness shows for a failing test.
/// [`occ_with`] is the same run with the options of [`Setup`].
pub(crate) fn occ(
    dir: &Path,
    args: &[&str],
    env: &[(&str, Option<&str>)],
    stdin: Option<&str>,
) -> Ran {
    occ_with(
        dir,
        args,
        env,
        Setup {
            stdin,
            ..Setup::default()
        },
    )
}

/// What a run of [`occ_with`] has beyond [`occ`]'s plain one.
#[derive(Default)]
pub(crate) struct Setup<'a> {
    /// Its input (closed at once when `None` and `stdin_of` is too).
    pub stdin: Option<&'a str>,
    /// Its input streamed from this program's stdout (`head -c … /dev/zero`),
    /// for an input too big to hold.
    pub stdin_of: Option<&'a [&'a str]>,
    /// Its stdout a pipe whose reading end is closed before it starts.
    pub closed_stdout: bool,
    /// Its address space limited to this many KiB (`ulimit -v`).
    pub memory_kib: Option<u64>,
    /// How long it may run: then it and every process it started (its
    /// process group) are killed, and [`Ran::killed`] says so; whatever it
    /// started and left running is killed when it ends.
    pub kill_after: Option<Duration>,
}

/// [`occ`] with the options of `setup`.
pub(crate) fn occ_with(
    dir: &Path,
    args: &[&str],
    env: &[(&str, Option<&str>)],
    setup: Setup<'_>,
) -> Ran {
    let mut cmd = occ_tests::cargo_occ(env!("CARGO_BIN_EXE_cargo-occ"), dir, args, &[]);
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    if let Some(kib) = setup.memory_kib {
        cmd = limited(&cmd, kib);
    }
    let ran = run(cmd, &setup);
    println!(
        "$ cargo occ {} (exit {})\n{}{}",
        args.join(" "),
        ran.code,
        ran.out,
        ran.err
    );
    ran
}

/// `cmd` started by a shell that first limits its address space to `kib`.
fn limited(cmd: &Command, kib: u64) -> Command {
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(format!("ulimit -v {kib}; exec \"$0\" \"$@\""))
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        sh.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => sh.env(k, v),
            None => sh.env_remove(k),
        };
    }
    sh
}

/// Runs `cmd` with the streams and time limit of `setup`; its input is
/// written and its output read from threads, so that a child that answers
/// while it reads cannot block.
fn run(mut cmd: Command, setup: &Setup<'_>) -> Ran {
    let mut feeder = setup.stdin_of.map(|program| {
        Command::new(program[0])
            .args(&program[1..])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {program:?}: {e}"))
    });
    match feeder.as_mut().and_then(|f| f.stdout.take()) {
        Some(input) => cmd.stdin(input),
        None => cmd.stdin(Stdio::piped()),
    };
    if setup.closed_stdout {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        cmd.stdout(writer);
    } else {
        cmd.stdout(Stdio::piped());
    }
    if setup.kill_after.is_some() {
        use std::os::unix::process::CommandExt;
        cmd.process_group(0);
    }
    let mut child = cmd
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let writer = child.stdin.take().map(|mut pipe| {
        let input = setup.stdin.unwrap_or_default().as_bytes().to_vec();
        std::thread::spawn(move || pipe.write_all(&input))
    });
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let (status, killed) = match setup.kill_after {
        None => (child.wait().expect("wait for cargo-occ"), false),
        Some(limit) => wait_or_kill(&mut child, limit),
    };
    if let Some(mut feeder) = feeder {
        let _ = feeder.kill();
        let _ = feeder.wait();
    }
    if let Some(writer) = writer {
        writer.join().expect("writer thread").expect("write stdin");
    }
    use std::os::unix::process::ExitStatusExt;
    Ran {
        code: status.code().unwrap_or(-1),
        out: out.join().expect("stdout reader"),
        err: err.join().expect("stderr reader"),
        signal: status.signal(),
        killed,
    }
}

/// Everything `pipe` gives until it closes, read on a thread.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            pipe.read_to_end(&mut bytes)
                .expect("read the child's output");
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// Waits for `child`, the leader of its process group, at most `limit`,
/// killing it if it runs longer (then `true`); either way whatever of its
/// group is still running is killed, so no process it started holds its
/// output open.
fn wait_or_kill(child: &mut std::process::Child, limit: Duration) -> (ExitStatus, bool) {
    let start = Instant::now();
    let ended = loop {
        if let Some(status) = child.try_wait().expect("wait for cargo-occ") {
            break Some(status);
        }
        if start.elapsed() > limit {
            break None;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let _ = Command::new("kill")
        .args(["-9", "--", &format!("-{}", child.id())])
        .status();
    match ended {
        Some(status) => (status, false),
        None => (child.wait().expect("wait for cargo-occ"), true),
    }
}
