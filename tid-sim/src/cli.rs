// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The command-line contract (`tid-sim --help` prints it).
//!
//! Parsed with `clap`'s derive into [`Options`]; then [`Options::check`]
//! refuses what the simulator would otherwise have to change silently
//! (sizes that do not split evenly, a reorder window of 1) and option
//! combinations that cannot work (`--soak` with a capture or a picture,
//! a context too small for one segment), each with the reason and, where
//! there is one, the nearest value that works.
//!
//! Exit codes: [`EXIT_PASS`], [`EXIT_FAIL`], [`EXIT_USAGE`].

use std::ffi::OsString;
use std::path::PathBuf;

use clap::Parser;
use hfi1_hal::consts::{MAX_SEGMENT_SIZE, PAGE_SIZE};
use serde::{Deserialize, Serialize};
use tid_read_proto::qualify::MIN_LENGTH;

/// Exit code of a run (or every soak seed) that passed.
pub const EXIT_PASS: u8 = 0;
/// Exit code of a run that failed: a byte differs, a QP is stuck,
/// something leaked, an engine erred, a READ failed with a status the
/// fabric does not explain (on a faultless fabric: any failed READ), or a
/// QP ended retry-exceeded after a retry no fault explains
/// ([`crate::explain`]).
pub const EXIT_FAIL: u8 = 1;
/// Exit code of a command line that was refused.
pub const EXIT_USAGE: u8 = 2;

/// RcvArray entries per TID group.
const GROUP_SIZE: u64 = 8;

const AFTER_HELP: &str = "\
SIZE takes a K, M or G suffix (powers of 1024). Each QP reads an equal
share of --bytes, in requests of --request bytes.

Exit status: 0 the run passed (every byte of every successful READ
verified, nothing stuck or left held, every failed READ failed as the
kernel fails it on that fabric: retry exceeded or flushed); 1 it failed;
2 the command line was refused. A dead link (--drop 1) passes when every
READ ends RETRY_EXC_ERR or flushed.

A QP may end RETRY_EXC_ERR only if the fabric explains each retry it
took: every retry (RC restart or TID retry expiry) needs a fault of its
own on that QP pair's packets (a drop, a duplicate or a stale copy,
either way) before it, so the k-th retry needs k faults by then. A retry
with no fault behind it fails the run; the summary's `explained` line
says which pairs and why.

Examples:
  tid-sim                                       the default scenario
  tid-sim --drop 0.05 --dup 0.01 --reorder 8 --stale 0.01 --pcap f.pcapng
  tid-sim --report run.svg --json               a picture and the JSON
  tid-sim --read-sizes mixed                    plain and TID READs
  tid-sim --drop 1 --json                       a dead link
  tid-sim --soak 300                            300 seeded hostile runs
  tid-sim --soak 10000 --seed 500000 -j 2       on two threads";

/// Everything the command line can set; also what a run's JSON records
/// as its inputs.
#[derive(Debug, Clone, PartialEq, Parser, Serialize, Deserialize)]
#[command(
    name = "tid-sim",
    version,
    about = "Simulates two nodes moving data with TID RDMA READ over the \
             software chip and checks every byte.",
    after_help = AFTER_HELP
)]
pub struct Options {
    /// Queue pairs on the requester, 1..=1024.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub qps: u32,
    /// Total bytes read, split evenly over the QPs: a multiple of QPs x 4K.
    #[arg(long, default_value = "64M", value_parser = parse_size, value_name = "SIZE")]
    pub bytes: u64,
    /// Bytes per RDMA READ request: a multiple of 4K, at most 2G, dividing
    /// each QP's share.
    #[arg(long, default_value = "1M", value_parser = parse_size, value_name = "SIZE")]
    pub request: u64,
    /// TID groups (8 RcvArray entries each) in the requester's receive
    /// context, 1..=256; at least enough for one segment (a 256K segment
    /// of scattered pages needs 8). The default is tight enough that QPs
    /// wait.
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub groups: u32,
    /// TID groups in the responder's receive context (where TID WRITE
    /// data lands), 1..=256; the default is `--groups`. With WRITEs it
    /// must hold one segment, as `--groups` must.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    #[serde(default)]
    pub resp_groups: Option<u32>,
    /// Path MTU: 4096 or 8192.
    #[arg(long, default_value_t = 4096, value_parser = parse_mtu)]
    pub mtu: u32,
    /// Seed of the scheduler, the page layout and the faults (a run is a
    /// function of it).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print one JSON object (inputs, counters, speed) instead of the
    /// summary.
    #[arg(long)]
    pub json: bool,
    /// With --json: add the time series the picture is drawn from.
    #[arg(long)]
    pub json_series: bool,
    /// Write every packet the fabric carried (after the fault injector,
    /// faults marked) to FILE, as pcapng.
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Draw the run over simulated time (TID entries, flows, waiting QPs,
    /// restarts, throughput) into FILE, an SVG.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Drop each packet with probability P, 0..=0.5, or 1 (a dead link:
    /// every READ must end retry-exceeded or flushed), both links.
    #[arg(long, default_value_t = 0.0, value_parser = parse_drop, value_name = "P")]
    pub drop: f64,
    /// Deliver each packet twice with probability P, 0..=0.5.
    #[arg(long, default_value_t = 0.0, value_parser = parse_probability, value_name = "P")]
    pub dup: f64,
    /// Deliver any of the first W packets in flight: 0 (in order) or
    /// 2..=64.
    #[arg(long, default_value_t = 0, value_parser = parse_reorder, value_name = "W")]
    pub reorder: usize,
    /// With probability P per packet, replay an earlier one, 0..=0.5.
    #[arg(long, default_value_t = 0.0, value_parser = parse_probability, value_name = "P")]
    pub stale: f64,
    /// Run N seeded scenarios (from --seed on) with random fault mixes and
    /// sizes; stop at and print the first failing seed.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub soak: u64,
    /// With --soak: run N seeds at once, one thread each (0, the default:
    /// one per CPU). The verdict and the seed reported are the same for
    /// every N.
    #[arg(long, short = 'j', default_value_t = 0, value_name = "N")]
    #[serde(default)]
    pub jobs: usize,
    /// READ sizes each QP cycles through instead of --request (its last
    /// READ takes what is left of its share): SIZEs separated by commas,
    /// multiples of 4K, or `mixed` (4K,64K,252K,256K,1M: below 256K a READ
    /// goes as a plain RDMA READ, from 256K on as a TID READ).
    #[arg(long, value_parser = parse_read_sizes, value_name = "LIST")]
    pub read_sizes: Option<ReadSizes>,
    /// What the requesters post: `read` (RDMA READs), `write` (RDMA
    /// WRITEs into the responder's scattered pages, its chip placing the
    /// data), or `mix` (each request a READ or a WRITE, drawn from the
    /// seed).
    #[arg(long, value_enum, default_value_t = Ops::Read)]
    #[serde(default)]
    pub ops: Ops,
    /// No progress bar (it is drawn on stderr only when stderr is a
    /// terminal).
    #[arg(long, short)]
    pub quiet: bool,
}

/// What the requesters post (`--ops`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Ops {
    /// RDMA READs only.
    #[default]
    Read,
    /// RDMA WRITEs only.
    Write,
    /// READs and WRITEs, each request drawn from the seed.
    Mix,
}

impl Ops {
    /// True if WRITEs are posted.
    pub fn writes(self) -> bool {
        self != Ops::Read
    }

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Ops::Read => "read",
            Ops::Write => "write",
            Ops::Mix => "mix",
        }
    }
}

/// The sizes `--read-sizes mixed` stands for: plain READs below 256 KiB,
/// TID READs from 256 KiB on.
pub const MIXED_READ_SIZES: [u64; 5] = [4 << 10, 64 << 10, 252 << 10, 256 << 10, 1 << 20];

/// A `--read-sizes` list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ReadSizes(pub Vec<u64>);

/// Parses a `--read-sizes` value: `mixed` or SIZEs separated by commas,
/// each a non-zero multiple of 4K of at most 2G.
///
/// # Errors
///
/// A message for clap naming the size refused.
pub fn parse_read_sizes(v: &str) -> Result<ReadSizes, String> {
    if v == "mixed" {
        return Ok(ReadSizes(MIXED_READ_SIZES.to_vec()));
    }
    let sizes = v
        .split(',')
        .map(|s| parse_size(s.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    match sizes
        .iter()
        .find(|&&r| r == 0 || r % u64::from(PAGE_SIZE) != 0 || r > 1 << 31)
    {
        Some(&r) => Err(format!(
            "{} is not a READ size: each must be a non-zero multiple of 4K, at most 2G",
            show_size(r)
        )),
        None => Ok(ReadSizes(sizes)),
    }
}

fn parse_drop(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(p) if p == 1.0 => Ok(p),
        _ => parse_probability(s).map_err(|e| format!("{e}, or 1 for a dead link")),
    }
}

impl Default for Options {
    fn default() -> Self {
        Self {
            qps: 16,
            bytes: 64 << 20,
            request: 1 << 20,
            groups: 12,
            resp_groups: None,
            mtu: 4096,
            seed: 1,
            json: false,
            json_series: false,
            pcap: None,
            report: None,
            drop: 0.0,
            dup: 0.0,
            reorder: 0,
            stale: 0.0,
            soak: 0,
            jobs: 0,
            read_sizes: None,
            ops: Ops::Read,
            quiet: false,
        }
    }
}

/// A refused command line: what is wrong and, when there is one, what
/// would work.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError {
    /// One line: what is wrong.
    pub message: String,
    /// One line: what to do instead.
    pub hint: String,
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}\n  hint: {}", self.message, self.hint)
    }
}

impl std::error::Error for CliError {}

fn refuse(message: String, hint: impl Into<String>) -> CliError {
    CliError {
        message,
        hint: hint.into(),
    }
}

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Run a scenario (or a soak).
    Run(Options),
    /// Print this text (help or version) and exit with 0.
    Print(String),
}

/// Parses the arguments (program name first, as `std::env::args_os`
/// gives them) and checks them.
///
/// # Errors
///
/// A [`CliError`] of one line and a hint: clap's own (an unknown flag, a
/// value out of range) or [`Options::check`]'s.
pub fn parse<I, T>(args: I) -> Result<Command, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    match Options::try_parse_from(args) {
        Ok(o) => {
            o.check()?;
            Ok(Command::Run(o))
        }
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp
            | clap::error::ErrorKind::DisplayVersion
            | clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                Ok(Command::Print(e.render().to_string()))
            }
            _ => Err(from_clap(&e)),
        },
    }
}

/// clap's error as one line and a hint: its first line without the
/// `error: ` prefix; its own tip if it has one.
fn from_clap(e: &clap::Error) -> CliError {
    let text = e.render().to_string();
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let message = lines
        .next()
        .unwrap_or("bad command line")
        .trim_start_matches("error: ")
        .to_string();
    let hint = lines.find_map(|l| l.strip_prefix("tip: ")).map_or_else(
        || "see 'tid-sim --help' for every option, its range and default".to_string(),
        str::to_string,
    );
    refuse(message, hint)
}

/// Parses a size with an optional K/M/G suffix (powers of 1024).
///
/// # Errors
///
/// A message for clap when it is not a number or overflows.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let bad = || format!("{s:?} is not a size: a number with an optional K, M or G suffix");
    let (digits, shift) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 20),
        Some(b'g' | b'G') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(1u64 << shift).ok_or_else(bad)
}

/// Writes a size with the largest suffix that divides it.
pub fn show_size(n: u64) -> String {
    for (shift, suffix) in [(30, "G"), (20, "M"), (10, "K")] {
        if n >= 1 << shift && n % (1 << shift) == 0 {
            return format!("{}{suffix}", n >> shift);
        }
    }
    n.to_string()
}

fn parse_probability(s: &str) -> Result<f64, String> {
    let p: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a probability"))?;
    if (0.0..=0.5).contains(&p) {
        Ok(p)
    } else {
        Err("a probability in 0..=0.5 (above 0.5 a run spends its time retrying)".into())
    }
}

fn parse_mtu(s: &str) -> Result<u32, String> {
    match s.parse() {
        Ok(m @ (4096 | 8192)) => Ok(m),
        _ => Err("the path MTUs of TID RDMA are 4096 and 8192".into()),
    }
}

fn parse_reorder(s: &str) -> Result<usize, String> {
    match s.parse() {
        Ok(w @ (0 | 2..=64)) => Ok(w),
        Ok(1) => Err("a window of 1 is in order: use 0 for in order or 2..=64".into()),
        Ok(_) => Err("0 (in order) or a window of 2..=64 packets".into()),
        Err(_) => Err(format!("{s:?} is not a number of packets")),
    }
}

/// RcvArray entries one segment of `request`-byte READs may need, laid
/// out as the simulator lays out destination pages (any page may be a
/// single scattered page): one per page of a full segment; none for a
/// READ below 256 KiB, which goes as a plain RDMA READ into eager buffers.
pub fn segment_entries(request: u64) -> u64 {
    if request < u64::from(MIN_LENGTH) {
        return 0;
    }
    request.min(u64::from(MAX_SEGMENT_SIZE)) / u64::from(PAGE_SIZE)
}

/// The fewest TID groups (8 entries each) that hold one segment of
/// `request`-byte READs: [`segment_entries`] rounded up to whole groups,
/// at least one.
pub fn min_groups(request: u64) -> u32 {
    u32::try_from(segment_entries(request).div_ceil(GROUP_SIZE).max(1)).unwrap_or(u32::MAX)
}

impl Options {
    /// Each QP's share of `--bytes`.
    pub fn per_qp(&self) -> u64 {
        self.bytes / u64::from(self.qps.max(1))
    }

    /// The sizes of READ a QP cycles through: `--read-sizes`, or
    /// `--request`.
    pub fn read_cycle(&self) -> &[u64] {
        match &self.read_sizes {
            Some(ReadSizes(r)) if !r.is_empty() => r,
            _ => core::slice::from_ref(&self.request),
        }
    }

    /// TID groups of the responder's receive context: `--resp-groups`,
    /// or `--groups`.
    pub fn responder_groups(&self) -> u32 {
        self.resp_groups.unwrap_or(self.groups)
    }

    /// The largest READ the run posts.
    pub fn largest_read(&self) -> u64 {
        self.read_cycle()
            .iter()
            .copied()
            .max()
            .unwrap_or(self.request)
    }

    /// Refuses what the simulator would have to change to run, and
    /// combinations that cannot work, naming what would.
    ///
    /// # Errors
    ///
    /// The first thing refused.
    pub fn check(&self) -> Result<(), CliError> {
        self.check_sizes()?;
        let smallest = self
            .read_cycle()
            .iter()
            .copied()
            .min()
            .unwrap_or(self.request);
        if self.ops.writes() && smallest < u64::from(MIN_LENGTH) {
            return Err(refuse(
                format!(
                    "--ops {} posts WRITEs of {}: below {} a WRITE goes as a plain RDMA WRITE, \
                     which the responder cannot receive yet",
                    self.ops.name(),
                    show_size(smallest),
                    show_size(u64::from(MIN_LENGTH))
                ),
                format!("use --request {} or more", show_size(u64::from(MIN_LENGTH))),
            ));
        }
        let largest = self.largest_read();
        let min = min_groups(largest);
        if self.groups < min {
            return Err(refuse(
                format!(
                    "--groups {} cannot hold one segment: a {} segment of scattered pages \
                     needs {} RcvArray entries, {min} groups",
                    self.groups,
                    show_size(largest.min(u64::from(MAX_SEGMENT_SIZE))),
                    segment_entries(largest),
                ),
                format!("use --groups {min} or more (every QP would wait forever)"),
            ));
        }
        if self.ops.writes() && self.responder_groups() < min {
            return Err(refuse(
                format!(
                    "--resp-groups {} cannot hold one WRITE segment: a {} segment of scattered \
                     pages needs {} RcvArray entries, {min} groups",
                    self.responder_groups(),
                    show_size(largest.min(u64::from(MAX_SEGMENT_SIZE))),
                    segment_entries(largest),
                ),
                format!("use --resp-groups {min} or more (every WRITE would wait forever)"),
            ));
        }
        if self.soak > 0 {
            for (set, name) in [
                (self.pcap.is_some(), "--pcap"),
                (self.report.is_some(), "--report"),
                (self.json_series, "--json-series"),
            ] {
                if set {
                    return Err(refuse(
                        format!("--soak runs many scenarios; {name} describes one run"),
                        format!(
                            "run the seed you want to look at alone (the soak prints its \
                             command line) and add {name} there"
                        ),
                    ));
                }
            }
        }
        if self.json_series && !self.json {
            return Err(refuse(
                "--json-series adds to the JSON output".into(),
                "add --json",
            ));
        }
        Ok(())
    }

    /// Sizes that split evenly: pages, QPs, requests.
    fn check_sizes(&self) -> Result<(), CliError> {
        let page = u64::from(PAGE_SIZE);
        if self.request == 0 || self.request % page != 0 {
            let near = (self.request.div_ceil(page)).max(1) * page;
            return Err(refuse(
                format!("--request {} is not a multiple of 4K", self.request),
                format!("use --request {}", show_size(near)),
            ));
        }
        if self.request > 1 << 31 {
            return Err(refuse(
                format!("--request {} is more than 2G", show_size(self.request)),
                "a verbs message length is 32 bits: use --request 2G or less",
            ));
        }
        let unit = u64::from(self.qps) * page;
        if self.bytes == 0 || self.bytes % unit != 0 {
            let near = self.bytes.div_ceil(unit).max(1) * unit;
            return Err(refuse(
                format!(
                    "--bytes {} does not split into whole pages over {} QPs",
                    show_size(self.bytes),
                    self.qps
                ),
                format!(
                    "use a multiple of {} QPs x 4K, e.g. --bytes {}",
                    self.qps,
                    show_size(near)
                ),
            ));
        }
        let share = self.per_qp();
        if self.request > share {
            return Err(refuse(
                format!(
                    "--request {} is more than each QP's share of --bytes ({} / {} QPs = {})",
                    show_size(self.request),
                    show_size(self.bytes),
                    self.qps,
                    show_size(share)
                ),
                format!(
                    "use --request {} or less, or --bytes {} or more",
                    show_size(share),
                    show_size(self.request * u64::from(self.qps))
                ),
            ));
        }
        if share % self.request != 0 {
            return Err(refuse(
                format!(
                    "each QP's share ({}) is not a whole number of --request {} READs",
                    show_size(share),
                    show_size(self.request)
                ),
                format!(
                    "use --bytes {} (QPs x a multiple of --request)",
                    show_size(share.div_ceil(self.request) * self.request * u64::from(self.qps))
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
