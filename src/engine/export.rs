//! The export and picture doors of the engine: a schedule as MSCCL XML, an MSCCL++ plan,
//! Chakra traces, a Chrome trace, a timeline or goodput SVG, each refused with a reason when
//! the schedule cannot be written that way; and `require_valid`, the check every export runs first.

use super::check::check_bounded;
use super::{ChakraExport, CheckReport, Error, GoodputChart, MscclOptions, MscclppOptions, Refuser};
use crate::schedule::Schedule;

/// A schedule as MSCCL XML (docs/FORMAT.md, "MSCCL XML"): refused when it cannot fit the
/// executor's limits (a cheap estimate first, before anything is built), when it is not
/// valid, or when the file would break a limit of the executor (each error names it).
pub fn export_msccl(s: &Schedule, opts: &MscclOptions) -> Result<String, Error> {
    use crate::export::msccl;
    msccl_fits(s, s.transfers.len())?;
    require_valid(s)?;
    msccl::to_xml(s, opts).map_err(|e| Error::refused(Refuser::MscclXml, e))
}

/// A schedule as an MSCCL++ execution plan (docs/FORMAT.md, "MSCCL++ execution plans"), or one
/// rank's view of it (`opts.rank`; a rank outside the plan is the caller's error, field
/// `rank`): refused when it cannot fit the executor's limits (a cheap estimate first), when it
/// is not valid, or when the plan would break a limit (each error names it).
pub fn export_mscclpp(s: &Schedule, opts: &MscclppOptions) -> Result<String, Error> {
    export_mscclpp_reached(s, opts).map(|(plan, _)| plan)
}

/// The largest `maxBytes` an MSCCL XML states (2^63 − 1): a larger `max_bytes` is written as
/// this (the CLI says so).
pub const MSCCL_MAX_BYTES: u64 = crate::export::msccl::MAX_BYTES;

/// `export_mscclpp`, with the largest message size the plan was written for: `max_bytes`
/// where the plan's 32-bit offsets reach it, what they reach otherwise (the CLI says so when
/// that cut `--max-bytes`).
pub fn export_mscclpp_reached(s: &Schedule, opts: &MscclppOptions) -> Result<(String, u64), Error> {
    use crate::export::mscclpp;
    mscclpp::fits(s).map_err(|e| Error::refused(Refuser::MscclppPlan, e))?;
    require_valid(s)?;
    mscclpp::to_plan(s, opts).map_err(|e| match e {
        // The caller's choice, not a limit of the executor.
        mscclpp::MscclppError::Rank { .. } => Error::Input(crate::error::InputError::new("rank", e.to_string())),
        e => Error::refused(Refuser::MscclppPlan, e),
    })
}

/// A schedule as Chakra execution traces for ASTRA-sim (docs/FORMAT.md, "Chakra ET export"):
/// validated first; `prefix` names the files, `dir` (absolute) is where they will be, named in
/// the system configuration (without it, the bare prefix). A bad prefix is the caller's error
/// (field `prefix`).
pub fn export_chakra(s: &Schedule, prefix: &str, dir: Option<&str>) -> Result<ChakraExport, Error> {
    chakra_fits(s, s.transfers.len())?;
    require_valid(s)?;
    crate::export::chakra::to_chakra(s, prefix, dir).map_err(chakra_error)
}

/// Rank `rank`'s Chakra trace of `s` (its file name and bytes), the same as that rank's file
/// of `export_chakra`, for runtimes that load one rank at a time; not bounded by the whole
/// export's transfer limit. A rank the topology does not have is the caller's error (field
/// `rank`).
pub fn export_chakra_rank(s: &Schedule, prefix: &str, rank: u32) -> Result<(String, Vec<u8>), Error> {
    chakra_rank_fits(s, s.transfers.len(), rank)?;
    require_valid(s)?;
    crate::export::chakra::rank_trace(s, prefix, rank).map_err(chakra_error)
}

/// `export_chakra_rank`'s limits on a schedule's outline (`s` without its transfer list, or
/// with it) and its number of transfers, tested before the schedule is decoded or validated.
pub fn chakra_rank_fits(s: &Schedule, transfers: usize, rank: u32) -> Result<(), Error> {
    crate::export::chakra::rank_fits(s.topology.npus(), transfers, rank).map_err(chakra_error)
}

/// A Chakra export's refusal: the caller's prefix or rank (named), else the format's limit.
fn chakra_error(e: crate::export::chakra::ChakraError) -> Error {
    use crate::export::chakra::ChakraError;
    match e {
        ChakraError::Prefix { .. } => Error::Input(crate::error::InputError::new("prefix", e.to_string())),
        ChakraError::Rank { .. } => Error::Input(crate::error::InputError::new("rank", e.to_string())),
        e => Error::refused(Refuser::ChakraEt, e),
    }
}

/// The cheap first test of `export_msccl`, on a schedule's outline: `s` without its transfer
/// list (or with it) and the number of its transfers. A service holding a schedule packed
/// refuses with it before decoding the schedule (the same error `export_msccl` gives).
pub fn msccl_fits(s: &Schedule, transfers: usize) -> Result<(), Error> {
    crate::export::msccl::fits_outline(s, transfers).map_err(|e| Error::refused(Refuser::MscclXml, e))
}

/// `msccl_fits` for `export_mscclpp`.
pub fn mscclpp_fits(s: &Schedule, transfers: usize) -> Result<(), Error> {
    crate::export::mscclpp::fits_outline(s, transfers).map_err(|e| Error::refused(Refuser::MscclppPlan, e))
}

/// `msccl_fits` for `export_chakra`'s whole export: its transfers and its (NPU, slot) cells.
pub fn chakra_fits(s: &Schedule, transfers: usize) -> Result<(), Error> {
    crate::export::chakra::fits(s, transfers).map_err(|e| Error::refused(Refuser::ChakraEt, e))
}

/// The files of a Chakra export as one tar archive.
pub fn chakra_tar(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    crate::export::chakra::to_tar(files)
}

/// Validates and simulates a schedule a caller gives (without the lower bounds): an invalid one
/// is the caller's error, naming the violation count and the first violation.
pub fn require_valid(s: &Schedule) -> Result<CheckReport, Error> {
    let r = check_bounded(s, false);
    if !r.valid {
        let first = r.violations.first().map(|v| v.message.as_str()).unwrap_or("unknown");
        return Err(Error::Input(crate::error::InputError::new(
            "schedule",
            format!(
                "not a valid schedule ({}{}; the first: {first})",
                if r.violation_count_capped { "at least " } else { "" },
                crate::units::counted(r.violation_count, "violation")
            ),
        )));
    }
    Ok(r)
}

/// Slices a Chrome trace written by the CLI may hold (one per transfer and link of its path;
/// about 300 bytes each).
pub const MAX_TRACE_SLICES: usize = 2_000_000;
/// The same for the HTTP service, where one request must not take hundreds of megabytes.
pub const API_MAX_TRACE_SLICES: usize = 200_000;

/// The replay's per-transfer times and each link of each path with the span it is busy for
/// it (a relayed transfer's hop's), for the pictures: refused when the schedule cannot be
/// simulated or would draw more than `max_slices` slices (estimated first).
fn replayed(
    s: &Schedule,
    (max_slices, what): (usize, &str),
) -> Result<(Vec<crate::sim::TransferTime>, crate::export::LinkSpans), Error> {
    let n = crate::export::trace::slices(s);
    if n > max_slices {
        return Err(Error::refused(
            Refuser::Picture,
            format!("the {what} would hold {n} slices (one per transfer and link of its path); at most {max_slices}"),
        ));
    }
    let r = check_bounded(s, false);
    if r.timing.is_none() {
        let first = r.violations.first().map(|v| v.message.as_str()).unwrap_or("unknown");
        return Err(Error::Input(crate::error::InputError::new("schedule", format!("cannot be simulated: {first}"))));
    }
    let internal = |e: crate::sim::SimError| Error::refused(Refuser::Simulator, e);
    let (_, times, hops) = crate::sim::simulate_with_hops(s).map_err(internal)?;
    let links = crate::sim::link_spans(s, &times, &hops).map_err(internal)?;
    Ok((times, links))
}

/// Each transfer's start and end in the replay (indexed as `s.transfers`).
pub fn transfer_times(s: &Schedule) -> Result<Vec<crate::sim::TransferTime>, Error> {
    crate::sim::simulate_with_times(s).map(|(_, t)| t).map_err(|e| Error::refused(Refuser::Simulator, e))
}

/// The schedule's replay as a Chrome/Perfetto trace (JSON): one track per link, one slice per
/// transfer on each link of its path, times in µs; refused beyond `max_slices` slices
/// (`MAX_TRACE_SLICES` for the CLI, `API_MAX_TRACE_SLICES` for the service). Invalid but simulatable schedules are
/// drawn too (that is when one looks).
pub fn export_trace(s: &Schedule, max_slices: usize) -> Result<String, Error> {
    let (times, links) = replayed(s, (max_slices, "trace"))?;
    Ok(crate::export::trace::chrome_trace(s, &times, &links))
}

/// An SVG timeline, and what is wrong with the schedule it draws.
#[derive(Clone, Debug)]
pub struct Timeline {
    pub svg: String,
    /// Where the schedule is not valid: how many violations, and the first (the picture says
    /// the same in red under its title).
    pub invalid: Option<String>,
}

/// The schedule's replay as an SVG timeline of link use. An invalid schedule that can be
/// simulated is drawn too (that is when one looks), saying so under the title.
pub fn plot_timeline(s: &Schedule) -> Result<Timeline, Error> {
    let (times, links) = replayed(s, (crate::export::plot::MAX_TIMELINE_SLICES, "picture"))?;
    // Cheap beside the replay: a drawable schedule has at most `MAX_TIMELINE_SLICES` bars.
    let report = crate::validate::validate(s);
    let invalid = (!report.valid).then(|| {
        let at_least = if report.violation_count_capped { "at least " } else { "" };
        let first = report.violations.first().map(|v| v.message.as_str()).unwrap_or("unknown");
        format!(
            "not valid: {at_least}{}, the first: {first}",
            crate::units::counted(report.violation_count, "violation")
        )
    });
    let svg = crate::export::plot::timeline_svg(s, &times, &links, invalid.as_deref());
    Ok(Timeline { svg, invalid })
}

/// Goodput against message size as SVG, one chart per entry.
pub fn plot_goodput(charts: &[GoodputChart]) -> String {
    crate::export::plot::goodput_svg(charts)
}

/// What a caller can ask to be written, at either door (the CLI's `--format`, the API's
/// `format=`): each door spells these its own way and maps them here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Writer {
    /// Schedule v1 JSON, compact.
    Json,
    /// Schedule v1 JSON, explicit.
    Explicit,
    /// MSCCL XML.
    MscclXml,
    /// An MSCCL++ execution plan.
    MscclppJson,
    /// A Chrome/Perfetto trace of the replay.
    ChromeTrace,
    /// An SVG timeline of the replay.
    TimelineSvg,
    /// Chakra execution traces.
    ChakraEt,
}

/// An option of the export writers, as both doors take it (a flag, a query key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportOption {
    /// One rank's view.
    Rank,
    /// The MSCCL executor the file is for.
    MscclTarget,
    /// NCCL's protocol named in an MSCCL file.
    Protocol,
    /// The algorithm's or plan's name.
    Name,
    /// The smallest message size the executor picks the algorithm for.
    MinBytes,
    /// The largest.
    MaxBytes,
    /// An MSCCL++ plan marked for in-place calls.
    InPlace,
    /// The Chakra files' prefix.
    Prefix,
}

impl ExportOption {
    /// Every option, in the order the doors check them (the first that does not apply is named).
    pub const ALL: [ExportOption; 8] = [
        Self::Rank,
        Self::MscclTarget,
        Self::Protocol,
        Self::Name,
        Self::MinBytes,
        Self::MaxBytes,
        Self::InPlace,
        Self::Prefix,
    ];

    /// The writers that read the option, and what it does for them, as the end of "only
    /// <writers> ...". The one table both doors refuse by: an option a writer does not read was
    /// ignored, silently (`--msccl-proto LL` on an MSCCL++ plan changed nothing).
    pub fn read_by(self) -> (&'static [Writer], &'static str) {
        use Writer::*;
        match self {
            Self::Rank => (&[MscclppJson, ChakraEt], "have a per-rank view"),
            Self::MscclTarget => (&[MscclXml], "names an executor"),
            Self::Protocol => (&[MscclXml], "names a protocol"),
            Self::Name => (&[MscclXml, MscclppJson], "name the algorithm"),
            Self::MinBytes | Self::MaxBytes => (&[MscclXml, MscclppJson], "carry a size range"),
            Self::InPlace => (&[MscclppJson], "marks in-place calls"),
            Self::Prefix => (&[ChakraEt], "names its files"),
        }
    }
}

/// The first of the options given (in `ExportOption::ALL`'s order) that `writer` does not read,
/// with its value as the caller spelled it.
pub fn unread_option<V>(writer: Writer, mut given: impl FnMut(ExportOption) -> Option<V>) -> Option<(ExportOption, V)> {
    ExportOption::ALL.into_iter().filter(|o| !o.read_by().0.contains(&writer)).find_map(|o| given(o).map(|v| (o, v)))
}

/// What a name's unwritable character (`ExportOptionError::NameControl`) is, in words.
pub fn unwritable_kind(code: u32) -> &'static str {
    if char::from_u32(code).is_some_and(char::is_control) { "control character" } else { "non-character" }
}

/// The longest export name taken, in bytes: what the MSCCL executor's 256-byte attribute
/// buffer holds with its terminating zero (every format, as the other checks of a name).
pub const MAX_NAME_BYTES: usize = crate::export::MAX_NAME_BYTES;

/// A mistake in an export's size range or name, found before anything is built (the writers
/// check the sizes too, but their refusal names only the format). Each door names the option
/// its own way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportOptionError {
    /// An empty name: the executors tell plans apart by name (MSCCL++ reuses one's context for
    /// another of the same name).
    EmptyName,
    /// A name with a control character (XML 1.0 allows none but tab, line feed and carriage
    /// return, escaped or not: an MSCCL file with one is not well-formed), or U+FFFE or U+FFFF.
    NameControl {
        /// The character's code point.
        code: u32,
    },
    /// A name longer than `MAX_NAME_BYTES` bytes as an XML attribute writes it (`&` is `&amp;`):
    /// the MSCCL executor copies an attribute, undecoded, into a buffer of 256 bytes up to the
    /// closing quote without a bound (its `mscclXmlGetValue`), so a longer one overruns it.
    NameTooLong {
        /// The name's length in bytes, escaped.
        bytes: usize,
    },
    /// `max_bytes = 0`, which the executors read as no upper limit.
    MaxBytesZero,
    /// A range that holds no size.
    MinAboveMax {
        /// The smallest size given, in bytes.
        min: u64,
        /// The largest, in bytes.
        max: u64,
    },
}

/// `ExportOptionError`'s checks, for every format (`--max-bytes 0` was written into an MSCCL++
/// plan, which reads it as no upper limit).
pub fn check_export_options(
    name: Option<&str>,
    min_bytes: Option<u64>,
    max_bytes: Option<u64>,
) -> Result<(), ExportOptionError> {
    if name == Some("") {
        return Err(ExportOptionError::EmptyName);
    }
    // Refused for every format, tab and line breaks too: a name is one line of text.
    if let Some(c) = name.and_then(|n| n.chars().find(|&c| crate::export::unwritable(c))) {
        return Err(ExportOptionError::NameControl { code: c as u32 });
    }
    if let Some(bytes) = name.map(crate::export::escaped_len).filter(|&b| b > MAX_NAME_BYTES) {
        return Err(ExportOptionError::NameTooLong { bytes });
    }
    match (min_bytes, max_bytes) {
        (_, Some(0)) => Err(ExportOptionError::MaxBytesZero),
        (Some(min), Some(max)) if min > max => Err(ExportOptionError::MinAboveMax { min, max }),
        _ => Ok(()),
    }
}
