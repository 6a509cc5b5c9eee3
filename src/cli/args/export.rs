//! The flags that choose what a schedule is written as (`synth --format`, `export`): the
//! formats, and the MSCCL and Chakra writers' options.
use crate::engine;
use clap::ValueEnum;

/// What `synth --format` and `export --format` write.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// Schedule v1 JSON in the compact form (docs/FORMAT.md): runs of chunks as ranges, the
    /// conditions the collective implies left out.
    #[default]
    Json,
    /// Schedule v1 JSON in the explicit form: every chunk id listed and both conditions written
    /// out, as readers before the compact form take it (docs/FORMAT.md, "Compact form").
    Explicit,
    /// The MSCCL executor's algorithm XML (docs/FORMAT.md, "MSCCL XML").
    MscclXml,
    /// An MSCCL++ execution plan, one JSON file for every GPU (docs/FORMAT.md, "MSCCL++
    /// execution plans").
    MscclppJson,
    /// Chakra execution traces for ASTRA-sim, one per NPU, with the workload and configuration
    /// files, into the directory `--out` names (docs/FORMAT.md, "Chakra ET export").
    ChakraEt,
}

impl Format {
    /// The format as its flag spells it.
    pub fn name(self) -> String {
        value_name(self)
    }

    /// The engine's name for the writer.
    pub(in crate::cli) fn writer(self) -> engine::Writer {
        match self {
            Format::Json => engine::Writer::Json,
            Format::Explicit => engine::Writer::Explicit,
            Format::MscclXml => engine::Writer::MscclXml,
            Format::MscclppJson => engine::Writer::MscclppJson,
            Format::ChakraEt => engine::Writer::ChakraEt,
        }
    }
}

/// How `--format chakra-et` names its files.
#[derive(clap::Args, Clone, Debug)]
pub struct ChakraArgs {
    /// The files' prefix: `PREFIX.<npu>.et`, `PREFIX.workload.<npu>.et`, `PREFIX.system.json`, ...
    /// (default: ccsynth).
    #[arg(long)]
    pub prefix: Option<String>,
}

impl ChakraArgs {
    pub(in crate::cli) fn prefix(&self) -> &str {
        self.prefix.as_deref().unwrap_or("ccsynth")
    }
}

/// The executor an MSCCL file is for.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MscclTargetArg {
    /// The MSCCL executor for NCCL: 64 steps per thread block.
    #[default]
    Current,
    /// The original MSCCL: 256 steps per thread block, spells `reduce_scatter`.
    Legacy,
    /// RCCL's MSCCL: 64 steps per thread block, 64 thread blocks per GPU, no fused receives.
    Rccl,
}

/// NCCL's protocol named in an MSCCL file.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum MscclProtoArg {
    #[default]
    #[value(name = "Simple", alias = "simple")]
    Simple,
    #[value(name = "LL", alias = "ll")]
    Ll,
    #[value(name = "LL128", alias = "ll128")]
    Ll128,
}

/// The flags of an MSCCL XML file or an MSCCL++ plan (`export`, `synth --format msccl-xml` or
/// `mscclpp-json`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct MscclArgs {
    /// `--format msccl-xml`: the executor the file is for (its step limit and spelling;
    /// default: current).
    #[arg(long, value_enum)]
    pub msccl_target: Option<MscclTargetArg>,
    /// `--format msccl-xml`: NCCL protocol the executor runs the algorithm with (default: Simple).
    #[arg(long, value_enum)]
    pub msccl_proto: Option<MscclProtoArg>,
    /// The algorithm's name in the file (default: ccsynth-<algorithm>), or the MSCCL++ plan's
    /// name (default: ccsynth-<algorithm>-<collective>-<ranks>gpus-<digest of the plan>).
    #[arg(long, value_name = "NAME")]
    pub msccl_name: Option<String>,
    /// Smallest message size, in bytes or as 64KiB, the executor picks the algorithm for
    /// (default 0).
    #[arg(allow_negative_numbers = true, long, value_name = "SIZE")]
    pub min_bytes: Option<String>,
    /// Largest message size the executor picks the algorithm for, inclusive (default: none;
    /// for an MSCCL++ plan, what its 32-bit offsets reach).
    #[arg(allow_negative_numbers = true, long, value_name = "SIZE")]
    pub max_bytes: Option<String>,
    /// `--format mscclpp-json`: mark the plan for in-place calls (the NCCL shim then selects
    /// it only for those; the plan is correct either way).
    #[arg(long)]
    pub in_place: bool,
    /// `--format mscclpp-json`: write rank R's view of the plan (what `ExecutionPlan(path, R)`
    /// loads: every GPU's buffers and channels, R's thread blocks only), for runtimes that
    /// hand each rank its own file; `--format chakra-et`: rank R's trace alone, into --out DIR
    /// (the same file as the whole export's).
    #[arg(allow_negative_numbers = true, long, value_name = "R")]
    pub rank: Option<u32>,
}

impl MscclArgs {
    pub(in crate::cli) fn options(&self) -> Result<engine::MscclOptions, String> {
        let size = |flag: &str, v: &Option<String>| {
            v.as_deref().map(|s| crate::units::parse_size(s).map_err(|e| format!("{flag}: {e}"))).transpose()
        };
        let (min_bytes, max_bytes) = (size("--min-bytes", &self.min_bytes)?, size("--max-bytes", &self.max_bytes)?);
        use engine::ExportOptionError as E;
        match engine::check_export_options(self.msccl_name.as_deref(), min_bytes, max_bytes) {
            Ok(()) => {}
            Err(E::EmptyName) => {
                return Err("--msccl-name '': name the algorithm, or leave --msccl-name out for the default".into());
            }
            Err(E::NameControl { code }) => {
                return Err(format!(
                    "--msccl-name: holds the {} U+{code:04X}: name the algorithm in printable characters",
                    engine::unwritable_kind(code)
                ));
            }
            Err(E::NameTooLong { bytes }) => {
                return Err(format!(
                    "--msccl-name: {bytes} bytes as an XML attribute writes it: at most {} (the MSCCL executor's buffer)",
                    engine::MAX_NAME_BYTES
                ));
            }
            Err(E::MaxBytesZero) => {
                return Err(
                    "--max-bytes 0: the executor reads maxBytes = 0 as no upper limit; leave --max-bytes out for that"
                        .into(),
                );
            }
            Err(E::MinAboveMax { min, max }) => return Err(format!("--min-bytes {min} is above --max-bytes {max}")),
        }
        Ok(engine::MscclOptions {
            target: match self.msccl_target.unwrap_or_default() {
                MscclTargetArg::Current => engine::MscclTarget::Current,
                MscclTargetArg::Legacy => engine::MscclTarget::Legacy,
                MscclTargetArg::Rccl => engine::MscclTarget::Rccl,
            },
            protocol: match self.msccl_proto.unwrap_or_default() {
                MscclProtoArg::Simple => engine::MscclProtocol::Simple,
                MscclProtoArg::Ll => engine::MscclProtocol::Ll,
                MscclProtoArg::Ll128 => engine::MscclProtocol::Ll128,
            },
            name: self.msccl_name.clone(),
            min_bytes,
            max_bytes,
        })
    }

    pub(in crate::cli) fn mscclpp_options(&self) -> Result<engine::MscclppOptions, String> {
        let o = self.options()?;
        Ok(engine::MscclppOptions {
            name: o.name,
            in_place: self.in_place,
            min_bytes: o.min_bytes,
            max_bytes: o.max_bytes,
            rank: self.rank,
        })
    }

    /// Refuses, before any work is done, a flag `format` does not read (each was ignored: an
    /// `--msccl-proto LL` on an MSCCL++ plan changed nothing and said nothing), and a Chakra
    /// export without the directory it writes into (it was refused only once the schedule was
    /// validated, or synthesized). Notes on stderr a `--max-bytes` past what an MSCCL XML
    /// states, as the MSCCL++ plan's writer notes its own cut (it was cut silently).
    pub(in crate::cli) fn check_format(
        &self,
        format: Format,
        chakra: &ChakraArgs,
        out: Option<&std::path::Path>,
    ) -> Result<(), String> {
        use engine::ExportOption as O;
        let unread = engine::unread_option(format.writer(), |o| match o {
            O::Rank => self.rank.map(|r| format!("--rank {r}")),
            O::MscclTarget => self.msccl_target.map(|t| format!("--msccl-target {}", value_name(t))),
            O::Protocol => self.msccl_proto.map(|p| format!("--msccl-proto {}", value_name(p))),
            O::Name => {
                self.msccl_name.as_ref().map(|n| format!("--msccl-name {}", if n.is_empty() { "''" } else { n }))
            }
            O::MinBytes => self.min_bytes.as_ref().map(|b| format!("--min-bytes {b}")),
            O::MaxBytes => self.max_bytes.as_ref().map(|b| format!("--max-bytes {b}")),
            O::InPlace => self.in_place.then(|| "--in-place".to_string()),
            O::Prefix => chakra.prefix.as_ref().map(|p| format!("--prefix {p}")),
        });
        if let Some((option, given)) = unread {
            let (writers, what) = option.read_by();
            let names: Vec<String> = Format::value_variants()
                .iter()
                .filter(|f| writers.contains(&f.writer()))
                .map(|&f| value_name(f))
                .collect();
            return Err(format!("{given}: only --format {} {what}", names.join(" and ")));
        }
        let max_bytes = self.max_bytes.as_deref().and_then(|b| crate::units::parse_size(b).ok());
        if let Some(asked) = max_bytes.filter(|&b| format == Format::MscclXml && b > engine::MSCCL_MAX_BYTES) {
            let max = engine::MSCCL_MAX_BYTES;
            eprintln!(
                "ccsynth: note: --max-bytes {asked} is beyond the largest size an MSCCL XML states; written as {max} (maxBytes)"
            );
        }
        if format == Format::ChakraEt && out.is_none() {
            return Err("--format chakra-et writes several files: name their directory with --out DIR".into());
        }
        Ok(())
    }
}

/// A value as its flag spells it.
fn value_name(v: impl clap::ValueEnum) -> String {
    v.to_possible_value().map(|p| p.get_name().to_string()).unwrap_or_default()
}

/// `ccsynth export`'s flags.
#[derive(clap::Args, Debug, Clone)]
pub struct ExportArgs {
    /// The schedule v1 JSON file, or - for stdin.
    pub file: String,
    /// The format to write.
    #[arg(long, value_enum)]
    pub format: Format,
    /// Write here instead of stdout.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub msccl: MscclArgs,
    #[command(flatten)]
    pub chakra: ChakraArgs,
}
