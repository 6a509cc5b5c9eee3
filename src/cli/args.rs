//! The command line's grammar: clap's commands, the request's arguments (collective, synthesis,
//! regeneration, output) and the parsers of their values (chunks per NPU); `serve`'s flags in
//! `args::serve`, the output formats' and MSCCL's in `args::export`. Stable: scripts depend on
//! its verbs and flags.
// GLOB-REMOVED
use clap::{Parser, Subcommand};

mod export;
mod serve;
pub use export::{ChakraArgs, ExportArgs, Format, MscclArgs, MscclProtoArg, MscclTargetArg};
pub use serve::ServeArgs;

#[derive(Parser, Debug)]
#[command(name = "ccsynth", version, about = "Collective-communication algorithm synthesizer")]
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
        /// Slow the link U-V down (both directions unless --directed): `9-10@bw=25`,
        /// `9-10@lat=2000`, `9-10@bw=25;lat=2000` (GB/s, ns). Repeatable.
        #[arg(long = "degrade-link", value_name = "U-V@bw=X[;lat=Y]")]
        degrade_link: Vec<String>,
        /// Fail or slow only the direction U->V of each --fail-link and --degrade-link.
        #[arg(long)]
        directed: bool,
    },
    /// Validate a schedule (file or - for stdin). Exit 0 valid, 1 invalid, 2 unreadable.
    Validate {
        /// The schedule v1 JSON file, or - for stdin.
        file: String,
    },
    /// Simulate a schedule (file or - for stdin) and print the timing report.
    Simulate {
        /// The schedule v1 JSON file, or - for stdin.
        file: String,
        /// Also write a Chrome/Perfetto trace of the replay here (open it in ui.perfetto.dev):
        /// one track per link, one slice per transfer on each link of its path.
        #[arg(long, value_name = "FILE")]
        trace: Option<std::path::PathBuf>,
        /// Add each transfer's start and end (`transfer_times`, indexed as `transfers`).
        #[arg(long)]
        transfers: bool,
    },
    /// Draw SVG: a schedule's timeline of link use, or goodput against message size.
    Plot {
        #[command(subcommand)]
        what: PlotCommand,
    },
    /// Convert a schedule (file or - for stdin) to another program's format after validating
    /// it: `--format msccl-xml` writes the MSCCL executor's algorithm XML.
    Export(Box<ExportArgs>),
    /// Synthesize a schedule: schedule v1 (validated) with bounds and stats as JSON on stdout
    /// or to --out; at a terminal without --out or --json, a short summary instead.
    Synth(Box<SynthArgs>),
    /// Regenerate a schedule (file or - for stdin) after links or NPUs fail: first a repair
    /// that keeps every transfer the failures do not touch and reroutes the others, then a
    /// fresh synthesis of the same collective on the degraded topology within --time-limit;
    /// the faster is kept (`stats.regeneration` says which, beside the previous schedule's
    /// time). Output as for `synth`.
    Regenerate(Box<RegenerateArgs>),
    /// Build a hand-built baseline (validated, timed) as schedule v1 JSON; at a terminal
    /// without --out or --json, a short summary instead.
    Baseline(Box<BaselineArgs>),
    /// Run every applicable baseline and print a table (algorithm, time, ratio to the best and
    /// to the lower bound).
    Compare {
        #[command(flatten)]
        target: CollectiveArgs,
        /// Print the comparison as JSON instead of a table.
        #[arg(long)]
        json: bool,
        /// Add the synthesizer's row: `auto`'s schedule (the fastest of the greedy, the ILP on
        /// small topologies and the baselines).
        #[arg(long)]
        with_synth: bool,
        /// Random seed of the synthesizer's row (with --with-synth): the same seed gives the
        /// same row, and the output echoes it.
        #[arg(long, default_value_t = 0, requires = "with_synth")]
        seed: u64,
        /// Only these baselines, comma-separated (default: every one; see `baseline --list`).
        #[arg(long, value_delimiter = ',', value_name = "NAMES")]
        algos: Option<Vec<String>>,
    },
    /// Run the HTTP service (API v1, documented in openapi.yaml) until SIGTERM or Ctrl-C.
    Serve(Box<ServeArgs>),
    /// Run a benchmark suite and print a markdown table (or JSON).
    Bench {
        /// greedy, ilp, sizes, failures or scale (the ilp, sizes, failures and scale suites run
        /// each case once; --runs applies to greedy). `sizes` is the message-size sweep: `auto`, its
        /// greedy candidate and the best baseline from 32 B to 512 MiB, from any directory
        /// (its irregular fabric is built in); a row that cannot run fails the sweep. `failures`: tori intact
        /// against failed links and NPUs, each scenario regenerated from the intact schedule
        /// (--quick leaves out 32x32 and 64x64). `scale`: 4,096 to 16,384 NPUs at 1 GiB, each
        /// schedule written to a file and checked from it (--quick: a sixteenth the NPUs).
        #[arg(long, default_value = "greedy")]
        suite: String,
        /// greedy only: runs per case (default 3); the median synthesis time is reported.
        #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1000))]
        runs: Option<usize>,
        /// Only the smaller cases.
        #[arg(long)]
        quick: bool,
        /// Only cases whose name contains this.
        #[arg(long)]
        filter: Option<String>,
        /// Print the rows as JSON instead of a markdown table.
        #[arg(long)]
        json: bool,
        /// failures only: every case at this size instead of the suite's (256 MiB, 1 GiB on
        /// 64x64): 64MiB, 128MiB, ...
        #[arg(allow_negative_numbers = true, long)]
        size: Option<String>,
        /// failures only: the regenerations' effort, standard or thorough (the intact
        /// schedule, the targets' yardstick, at the default).
        #[arg(long, value_parser = crate::engine::Effort::parse)]
        effort: Option<crate::engine::Effort>,
    },
}

/// What `ccsynth plot` draws.
#[derive(Subcommand, Debug)]
pub enum PlotCommand {
    /// A schedule's replay (file or - for stdin): one row per link, one bar per transfer.
    Timeline {
        /// The schedule v1 JSON file, or - for stdin.
        file: String,
        /// Write the SVG here instead of stdout.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
    /// Goodput (size / time) against message size, from `ccsynth bench --suite sizes --json`
    /// (one chart per topology and collective: auto, the greedy, the best baseline, and the
    /// bound: size over the lower bound on time) or from `ccsynth compare --json` runs at several sizes, concatenated or in an
    /// array (one chart per collective and NPU count: every algorithm and the bound).
    Goodput {
        /// The JSON of `ccsynth bench --suite sizes --json` or of `compare --json` runs, or -
        /// for stdin.
        file: String,
        /// Write the SVG here instead of stdout.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
}

/// `--collective`: the kinds a command line can name (a `custom` collective needs its
/// conditions, given in a `--tenants` file).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
#[value(rename_all = "snake_case")]
pub enum CollectiveArg {
    #[value(alias = "all-gather")]
    AllGather,
    #[value(alias = "reduce-scatter")]
    ReduceScatter,
    #[value(alias = "all-reduce")]
    AllReduce,
    Broadcast,
    Reduce,
    Scatter,
    Gather,
    #[value(alias = "all-to-all")]
    AllToAll,
}

impl CollectiveArg {
    pub fn kind(self) -> crate::collective::CollectiveKind {
        use crate::collective::CollectiveKind as K;
        match self {
            CollectiveArg::AllGather => K::AllGather,
            CollectiveArg::ReduceScatter => K::ReduceScatter,
            CollectiveArg::AllReduce => K::AllReduce,
            CollectiveArg::Broadcast => K::Broadcast,
            CollectiveArg::Reduce => K::Reduce,
            CollectiveArg::Scatter => K::Scatter,
            CollectiveArg::Gather => K::Gather,
            CollectiveArg::AllToAll => K::AllToAll,
        }
    }
}

/// `--chunks-per-npu`: a number, or `auto` (left to the engine).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunks(pub Option<u32>);

impl std::str::FromStr for Chunks {
    type Err = String;
    fn from_str(s: &str) -> Result<Chunks, String> {
        match s {
            "auto" => Ok(Chunks(None)),
            n => n
                .parse::<u32>()
                .map(|k| Chunks(Some(k)))
                .map_err(|e| format!("{n:?}: expected `auto` or a number ({e})")),
        }
    }
}

#[derive(clap::Args, Debug, Clone)]
pub struct CollectiveArgs {
    /// A spec such as `torus:8x8@bw=50` or a topology JSON file.
    #[arg(long)]
    pub topology: String,
    /// The collective (required, except with `synth --tenants`, whose list may hold `custom`
    /// collectives too).
    #[arg(long, value_enum, ignore_case = true)]
    pub collective: Option<CollectiveArg>,
    /// Result buffer size at one NPU: 4096, 64KiB, 1GiB, 1GB, ... (required with --collective).
    #[arg(allow_negative_numbers = true, long)]
    pub size: Option<String>,
    /// Chunks each NPU's share is cut into: a number, or `auto` (the greedy and `auto` search
    /// a few from the links' costs and the size; the ILP takes 1, a baseline its minimum).
    #[arg(allow_negative_numbers = true, long, default_value = "auto")]
    pub chunks_per_npu: Chunks,
    /// Root NPU of broadcast, reduce, scatter and gather.
    #[arg(allow_negative_numbers = true, long)]
    pub root: Option<usize>,
    /// Comma-separated NPUs taking part (default: every live NPU).
    #[arg(long, value_delimiter = ',')]
    pub group: Option<Vec<usize>>,
    /// Remove the link U-V from the topology first (both directions unless --directed).
    /// Repeatable.
    #[arg(long = "fail-link", value_name = "U-V")]
    pub fail_link: Vec<String>,
    /// Remove NPU V from the topology first. Repeatable.
    #[arg(long = "fail-npu", value_name = "V")]
    pub fail_npu: Vec<usize>,
    /// Slow the link U-V down first (both directions unless --directed):
    /// `9-10@bw=25`, `9-10@lat=2000`, `9-10@bw=25,lat=2000` (GB/s, ns; `;` between the two
    /// works too, quoted from the shell). Repeatable.
    #[arg(long = "degrade-link", value_name = "U-V@bw=X[;lat=Y]")]
    pub degrade_link: Vec<String>,
    /// Fail or slow only the direction U->V of each --fail-link and --degrade-link.
    #[arg(long)]
    pub directed: bool,
}

#[derive(clap::Args, Debug, Clone)]
pub struct BaselineArgs {
    /// List the baselines and what they support.
    #[arg(long)]
    pub list: bool,
    /// ring, ring-bidir, direct, recursive-doubling, rabenseifner, bde, swing-latency,
    /// swing-bandwidth, bucket, bucket-bidir, traff, kolmakov, kolmakov-r<R> (R = 1, 2, …), mst, pairwise,
    /// bruck, dimension-ordered, pxn; `--list` says what each supports.
    #[arg(long, required_unless_present = "list")]
    pub algo: Option<String>,
    /// A spec such as `torus:8x8@bw=50` or a topology JSON file.
    #[arg(long, required_unless_present = "list")]
    pub topology: Option<String>,
    /// The collective.
    #[arg(long, value_enum, ignore_case = true, required_unless_present = "list")]
    pub collective: Option<CollectiveArg>,
    /// Result buffer size at one NPU: 4096, 64KiB, 1GiB, 1GB, ...
    #[arg(allow_negative_numbers = true, long, required_unless_present = "list")]
    pub size: Option<String>,
    /// Chunks per NPU: a number (a minimum: some baselines need more), or `auto` (the
    /// baseline's own minimum).
    #[arg(allow_negative_numbers = true, long, default_value = "auto")]
    pub chunks_per_npu: Chunks,
    /// Root NPU of broadcast, reduce, scatter and gather.
    #[arg(allow_negative_numbers = true, long)]
    pub root: Option<usize>,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(clap::Args, Debug, Clone)]
pub struct SynthArgs {
    #[command(flatten)]
    pub target: CollectiveArgs,
    /// A JSON file with a list of collective objects to synthesize jointly (multi-tenant),
    /// instead of --collective and --size (each tenant gives its own chunks_per_npu).
    #[arg(long, conflicts_with_all = ["collective", "size", "root", "group", "chunks_per_npu"])]
    pub tenants: Option<std::path::PathBuf>,
    /// `auto` (the portfolio: the fastest of the greedy, the ILP on small topologies and every
    /// applicable baseline), `greedy`, `ilp`, or a baseline's name.
    #[arg(long, default_value = "auto")]
    pub algo: String,
    /// Random seed; the same seed gives the same schedule.
    #[arg(allow_negative_numbers = true, long, default_value_t = 0)]
    pub seed: u64,
    /// Try seeds seed..seed+N in parallel and keep the best by simulated time [default: 1;
    /// the greedy and auto on up to 32 live NPUs: 4].
    #[arg(allow_negative_numbers = true, long)]
    pub seeds: Option<usize>,
    /// Threads for the greedy's runs and HiGHS (default: the runs share one pool of a thread
    /// per core, HiGHS takes one; 1: one after another).
    #[arg(allow_negative_numbers = true, long)]
    pub threads: Option<usize>,
    /// native, unwind:D or unwind:bi.
    #[arg(long, default_value = "native", value_parser = crate::engine::SwitchModel::parse)]
    pub switch_model: crate::engine::SwitchModel,
    /// standard, or thorough: more of the greedy's search (torus:32x32 after a failure at 64 MiB:
    /// 1.06–1.08× the intact schedule instead of 1.11×, for over ten times the synthesis time).
    #[arg(long, default_value = "standard", value_parser = crate::engine::Effort::parse)]
    pub effort: crate::engine::Effort,
    /// TEN timestep in ns (default: the fastest link's time for one chunk).
    #[arg(allow_negative_numbers = true, long)]
    pub discretization: Option<f64>,
    #[command(flatten)]
    pub output: OutputArgs,
    /// What to write: the schedule JSON with bounds and stats, the MSCCL executor's XML, an
    /// MSCCL++ plan, or Chakra traces for ASTRA-sim.
    #[arg(long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    #[command(flatten)]
    pub msccl: MscclArgs,
    #[command(flatten)]
    pub chakra: ChakraArgs,
    /// Add a `comparison` object: every applicable baseline on the same simulator.
    #[arg(long)]
    pub compare: bool,
    /// Overall time budget in seconds: `auto` returns the fastest candidate finished within it
    /// (`stats.portfolio` marks those it cut), the greedy its best finished run, the ilp its
    /// best complete schedule (marked `feasible`). Default 60, 600 with --effort thorough.
    #[arg(allow_negative_numbers = true, long, value_name = "SECONDS")]
    pub time_limit: Option<f64>,
    /// ilp: cap on one HiGHS solve in seconds (default: what is left of --time-limit).
    #[arg(allow_negative_numbers = true, long, value_name = "SECONDS")]
    pub solve_time_limit: Option<f64>,
    /// ilp: write the last model of each phase in LP format (FILE, or FILE with the phase
    /// name before the extension when a collective has two phases).
    #[arg(long, value_name = "FILE")]
    pub dump_lp: Option<std::path::PathBuf>,
    /// ilp: drop the congestion constraint (TACCL-like); the result is still simulated honestly.
    #[arg(long)]
    pub ignore_congestion: bool,
    /// ilp: time clustering (TACOS V-C), solving windows of W timesteps one after another.
    #[arg(allow_negative_numbers = true, long, value_name = "W")]
    pub window: Option<u32>,
}

#[derive(clap::Args, Debug)]
pub struct RegenerateArgs {
    /// The schedule v1 JSON file to regenerate, or - for stdin.
    pub schedule: String,
    /// The link U-V failed (both directions unless --directed). Repeatable.
    #[arg(long = "fail-link", value_name = "U-V")]
    pub fail_link: Vec<String>,
    /// NPU V failed, with all its links (it keeps its id and leaves the collective's group).
    /// Repeatable.
    #[arg(long = "fail-npu", value_name = "V")]
    pub fail_npu: Vec<usize>,
    /// The link U-V runs slower (both directions unless --directed): `9-10@bw=25`,
    /// `9-10@lat=2000`, `9-10@bw=25;lat=2000` (GB/s, ns); the repair keeps it where it is
    /// still the faster route. Repeatable.
    #[arg(long = "degrade-link", value_name = "U-V@bw=X[;lat=Y]")]
    pub degrade_link: Vec<String>,
    /// Fail or slow only the direction U->V of each --fail-link and --degrade-link.
    #[arg(long)]
    pub directed: bool,
    /// The fresh synthesis: `auto` (the portfolio), `greedy`, `ilp`, or a baseline's name.
    #[arg(long, default_value = "auto")]
    pub algo: String,
    /// Random seed of the fresh synthesis.
    #[arg(allow_negative_numbers = true, long, default_value_t = 0)]
    pub seed: u64,
    /// Seeds seed..seed+N for the fresh synthesis, best kept (default as for `synth`).
    #[arg(allow_negative_numbers = true, long)]
    pub seeds: Option<usize>,
    /// Threads for the fresh synthesis (as for `synth`).
    #[arg(allow_negative_numbers = true, long)]
    pub threads: Option<usize>,
    /// standard or thorough, for the fresh synthesis (as for `synth`).
    #[arg(long, default_value = "standard", value_parser = crate::engine::Effort::parse)]
    pub effort: crate::engine::Effort,
    /// Overall time budget in seconds, the repair's included. Default 60, 600 with --effort
    /// thorough.
    #[arg(allow_negative_numbers = true, long, value_name = "SECONDS")]
    pub time_limit: Option<f64>,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// Where `synth`, `regenerate` and `baseline` write their schedule, and how.
#[derive(clap::Args, Debug, Clone)]
pub struct OutputArgs {
    /// Write the schedule here instead of stdout.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Print the schedule JSON on stdout even at a terminal (where, without --out, a short
    /// summary is printed instead).
    #[arg(long)]
    pub json: bool,
    /// Print the human summary even when stdout is not a terminal (instead of the JSON,
    /// unless --out takes the JSON).
    #[arg(long, conflicts_with_all = ["json", "pretty"])]
    pub summary: bool,
    /// Indent the JSON (implies --json).
    #[arg(long)]
    pub pretty: bool,
}
