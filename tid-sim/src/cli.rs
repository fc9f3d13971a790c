// SPDX-License-Identifier: GPL-2.0 OR BSD-3-Clause
//! The command-line contract.
//!
//! `tid-sim [--qps N] [--bytes SIZE] [--request SIZE] [--groups G]
//! [--mtu 4096|8192] [--seed S] [--json] [--pcap FILE] [--drop P]
//! [--dup P] [--reorder W] [--stale P] [--soak N]`; sizes accept a
//! K, M or G suffix (powers of 1024).

use std::fmt;
use std::path::PathBuf;

/// A command-line error, printed with the usage text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CliError(pub String);

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CliError {}

/// The usage text.
pub const USAGE: &str = "\
usage: tid-sim [--qps N] [--bytes SIZE] [--request SIZE] [--groups G]
               [--mtu 4096|8192] [--seed S] [--json] [--pcap FILE]
               [--drop P] [--dup P] [--reorder W] [--stale P] [--soak N]

Simulates two nodes moving data with TID RDMA READ over the software chip
and checks every byte. SIZE takes a K, M or G suffix (powers of 1024).

  --qps N         queue pairs on the requester (default 16)
  --bytes SIZE    total bytes read, split evenly over the QPs (default 64M)
  --request SIZE  bytes per RDMA READ request (default 1M)
  --groups G      TID groups (8 RcvArray entries each) in the requester's
                  receive context (default 12: tight enough that QPs wait)
  --mtu M         path MTU, 4096 or 8192 (default 4096)
  --seed S        seed of the scheduler and the page allocator (default 1)
  --json          print one JSON object instead of the summary
  --pcap FILE     write every packet on the fabric to FILE (ERF in pcap)
  --drop P        drop each packet with probability P (both links)
  --dup P         deliver each packet twice with probability P
  --reorder W     deliver any of the first W packets in flight (W > 1)
  --stale P       with probability P per packet, replay an earlier one
  --soak N        run N seeded scenarios (from --seed on) with random
                  fault mixes and sizes; print the first failing seed
  -h, --help      this text
";

/// Everything the command line can set.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Queue pairs on the requester.
    pub qps: u32,
    /// Total bytes to read.
    pub bytes: u64,
    /// Bytes per RDMA READ request.
    pub request: u64,
    /// TID groups in the requester's receive context.
    pub groups: u32,
    /// Path MTU.
    pub mtu: u32,
    /// Seed.
    pub seed: u64,
    /// Print JSON.
    pub json: bool,
    /// Capture file.
    pub pcap: Option<PathBuf>,
    /// Drop probability per packet (both links).
    pub drop: f64,
    /// Duplicate probability per packet.
    pub dup: f64,
    /// Reorder window (packets; 0 or 1: in order).
    pub reorder: usize,
    /// Stale-replay probability per packet.
    pub stale: f64,
    /// Soak: run this many seeded scenarios (0: one normal run).
    pub soak: u64,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            qps: 16,
            bytes: 64 << 20,
            request: 1 << 20,
            groups: 12,
            mtu: 4096,
            seed: 1,
            json: false,
            pcap: None,
            drop: 0.0,
            dup: 0.0,
            reorder: 0,
            stale: 0.0,
            soak: 0,
        }
    }
}

/// What the command line asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Run a scenario.
    Run(Options),
    /// Print the usage text.
    Help,
}

/// Parses a size with an optional K/M/G suffix.
pub fn parse_size(s: &str) -> Result<u64, CliError> {
    let bad = || {
        CliError(format!(
            "bad size {s:?}: expected a number with an optional K, M or G suffix"
        ))
    };
    let (digits, shift) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 20),
        Some(b'g' | b'G') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: u64 = digits.parse().map_err(|_| bad())?;
    n.checked_mul(1u64 << shift).ok_or_else(bad)
}

fn parse_num<T: std::str::FromStr>(flag: &str, v: &str) -> Result<T, CliError> {
    v.parse()
        .map_err(|_| CliError(format!("{flag}: bad value {v:?}")))
}

/// Parses the arguments (without the program name).
pub fn parse<I: IntoIterator<Item = String>>(args: I) -> Result<Command, CliError> {
    let mut o = Options::default();
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, CliError> {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| CliError(format!("{name} needs a value")))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--qps" => o.qps = parse_num("--qps", &value("--qps")?)?,
            "--bytes" => o.bytes = parse_size(&value("--bytes")?)?,
            "--request" => o.request = parse_size(&value("--request")?)?,
            "--groups" => o.groups = parse_num("--groups", &value("--groups")?)?,
            "--mtu" => o.mtu = parse_num("--mtu", &value("--mtu")?)?,
            "--seed" => o.seed = parse_num("--seed", &value("--seed")?)?,
            "--json" => o.json = true,
            "--pcap" => o.pcap = Some(PathBuf::from(value("--pcap")?)),
            "--drop" => o.drop = parse_num("--drop", &value("--drop")?)?,
            "--dup" => o.dup = parse_num("--dup", &value("--dup")?)?,
            "--reorder" => o.reorder = parse_num("--reorder", &value("--reorder")?)?,
            "--stale" => o.stale = parse_num("--stale", &value("--stale")?)?,
            "--soak" => o.soak = parse_num("--soak", &value("--soak")?)?,
            other => return Err(CliError(format!("unknown argument {other:?}"))),
        }
    }
    validate(&o)?;
    Ok(Command::Run(o))
}

fn validate(o: &Options) -> Result<(), CliError> {
    let err = |m: &str| Err(CliError(m.to_string()));
    if o.qps == 0 || o.qps > 1024 {
        return err("--qps must be 1..=1024");
    }
    if o.mtu != 4096 && o.mtu != 8192 {
        return err("--mtu must be 4096 or 8192");
    }
    if o.request == 0 || o.request % 4096 != 0 {
        return err("--request must be a non-zero multiple of 4K");
    }
    if o.request > 1 << 31 {
        return err("--request must be at most 2G (a verbs message length is 32 bits)");
    }
    if o.bytes == 0 {
        return err("--bytes must be non-zero");
    }
    if o.groups == 0 || o.groups > 256 {
        return err("--groups must be 1..=256");
    }
    for (name, p) in [("--drop", o.drop), ("--dup", o.dup), ("--stale", o.stale)] {
        if !(0.0..=0.5).contains(&p) {
            return Err(CliError(format!("{name} must be a probability in 0..=0.5")));
        }
    }
    if o.reorder > 64 {
        return err("--reorder must be at most 64");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Options, CliError> {
        match parse(args.iter().map(|s| s.to_string()))? {
            Command::Run(o) => Ok(o),
            Command::Help => Err(CliError("help".into())),
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("256K").unwrap(), 256 << 10);
        assert_eq!(parse_size("64m").unwrap(), 64 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        assert!(parse_size("").is_err());
        assert!(parse_size("K").is_err());
        assert!(parse_size("1T").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
    }

    #[test]
    fn flags() {
        let o = run(&[
            "--qps",
            "4",
            "--bytes=8M",
            "--request",
            "512K",
            "--mtu",
            "8192",
            "--json",
        ])
        .unwrap();
        assert_eq!(
            (o.qps, o.bytes, o.request, o.mtu, o.json),
            (4, 8 << 20, 512 << 10, 8192, true)
        );
        assert_eq!(run(&[]).unwrap(), Options::default());
        assert!(run(&["--mtu", "2048"]).is_err());
        assert!(run(&["--qps"]).is_err());
        assert!(run(&["--request", "1000"]).is_err());
        assert!(run(&["--frobnicate"]).is_err());
        assert!(matches!(parse(["--help".to_string()]), Ok(Command::Help)));
        let f = run(&[
            "--drop",
            "0.05",
            "--dup",
            "0.01",
            "--reorder",
            "8",
            "--stale",
            "0.01",
            "--soak",
            "20",
        ])
        .unwrap();
        assert_eq!(
            (f.drop, f.dup, f.reorder, f.stale, f.soak),
            (0.05, 0.01, 8, 0.01, 20)
        );
        assert!(run(&["--drop", "0.9"]).is_err());
        assert!(run(&["--dup", "x"]).is_err());
    }
}
