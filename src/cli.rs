//! The command-line interface (stable: scripts depend on its verbs, flags and exit codes).

use crate::engine;
use crate::error::InputError;
use crate::schedule::Schedule;
use crate::topology::{Failures, Topology, parse_topology};
use clap::{Parser, Subcommand};
use std::io::{Read, Write};

#[derive(Parser, Debug)]
#[command(
    name = "ccsynth",
    version,
    about = "Collective-communication algorithm synthesizer"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Print the canonical topology JSON of a generator spec or a topology file.
    Topology {
        /// A spec such as `torus:8x8@bw=50` or a topology JSON file.
        topology: String,
        /// Remove the link U-V (both directions unless --directed). Repeatable.
        #[arg(long = "fail-link", value_name = "U-V")]
        fail_link: Vec<String>,
        /// Remove NPU V and all its links (it keeps its id). Repeatable.
        #[arg(long = "fail-npu", value_name = "V")]
        fail_npu: Vec<usize>,
        /// --fail-link removes only the direction U->V.
        #[arg(long)]
        directed: bool,
    },
    /// Validate a schedule (file or - for stdin). Exit 0 valid, 1 invalid, 2 unreadable.
    Validate { file: String },
    /// Simulate a schedule (file or - for stdin) and print the timing report.
    Simulate { file: String },
}

/// Runs the CLI and returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(code) => code,
        Err(msg) => {
            eprintln!("ccsynth: {msg}");
            2
        }
    }
}

fn run(cmd: Command) -> Result<i32, String> {
    match cmd {
        Command::Topology {
            topology,
            fail_link,
            fail_npu,
            directed,
        } => {
            let topo = load_topology(&topology)?;
            let mut f = Failures {
                links: Vec::new(),
                npus: fail_npu,
                directed,
            };
            for (i, s) in fail_link.iter().enumerate() {
                let parsed = s
                    .split_once('-')
                    .and_then(|(a, b)| Some([a.trim().parse().ok()?, b.trim().parse().ok()?]));
                match parsed {
                    Some(l) => f.links.push(l),
                    None => {
                        return Err(format!(
                            "--fail-link #{}: {s:?} is not of the form U-V (two node ids)",
                            i + 1
                        ));
                    }
                }
            }
            let topo = if f.links.is_empty() && f.npus.is_empty() {
                topo
            } else {
                let t = topo
                    .with_failures(&f)
                    .map_err(|e| format!("failures: {e}"))?;
                let c = t.connectivity();
                eprintln!(
                    "ccsynth: {} live NPUs, {}",
                    c.live_npus,
                    if c.connected {
                        "connected".to_string()
                    } else {
                        format!(
                            "NOT connected: {} components, sizes {:?}",
                            c.components.len(),
                            c.components.iter().map(Vec::len).collect::<Vec<_>>()
                        )
                    }
                );
                t
            };
            print_json(&topo)?;
            Ok(0)
        }
        Command::Validate { file } => {
            let s = load_schedule(&file)?;
            let r = engine::check(&s);
            print_json(&r)?;
            Ok(if r.valid { 0 } else { 1 })
        }
        Command::Simulate { file } => {
            let s = load_schedule(&file)?;
            let r = engine::check(&s);
            let Some(timing) = &r.timing else {
                let first = r
                    .violations
                    .first()
                    .map(|v| v.message.as_str())
                    .unwrap_or("unknown");
                eprintln!("ccsynth: the schedule cannot be simulated: {first}");
                return Ok(1);
            };
            if !r.valid {
                eprintln!(
                    "ccsynth: warning: the schedule is not valid ({} violations); timing shown anyway",
                    r.violation_count
                );
            }
            #[derive(serde::Serialize)]
            struct Out<'a> {
                valid: bool,
                #[serde(flatten)]
                timing: &'a crate::sim::Timing,
                lower_bound_ns: Option<f64>,
                lower_bounds: &'a Option<crate::bounds::LowerBounds>,
            }
            print_json(&Out {
                valid: r.valid,
                timing,
                lower_bound_ns: r.lower_bound_ns,
                lower_bounds: &r.lower_bounds,
            })?;
            Ok(0)
        }
    }
}

/// A topology from a generator spec or a JSON file.
pub fn load_topology(arg: &str) -> Result<Topology, String> {
    let path = std::path::Path::new(arg);
    if path.is_file() {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{arg}: {e}"))?;
        return Topology::from_json(&text).map_err(|e| format!("{arg}: {e}"));
    }
    if arg.contains(':') || arg.trim_start().starts_with('{') {
        return parse_topology(arg).map_err(|e: InputError| e.to_string());
    }
    Err(format!(
        "{arg:?} is neither a topology file nor a spec such as torus:4x4"
    ))
}

fn load_schedule(arg: &str) -> Result<Schedule, String> {
    let parsed = if arg == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| format!("stdin: {e}"))?;
        Schedule::from_json(&text)
    } else {
        let f = std::fs::File::open(arg).map_err(|e| format!("{arg}: {e}"))?;
        Schedule::from_reader(f)
    };
    parsed.map_err(|e| format!("{arg}: {e}"))
}

fn print_json<T: serde::Serialize>(v: &T) -> Result<(), String> {
    let out = std::io::stdout();
    let mut w = std::io::BufWriter::new(out.lock());
    serde_json::to_writer_pretty(&mut w, v).map_err(|e| e.to_string())?;
    writeln!(w)
        .and_then(|_| w.flush())
        .map_err(|e| e.to_string())
}
