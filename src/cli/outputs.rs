//! Where a command writes, checked before any work is done for it: an `--out` whose directory
//! exists, that is no directory, and that is not a file the command reads; and the directory of
//! Chakra traces it writes.

use super::CliError;
use crate::engine;
use crate::schedule::Schedule;

/// An output file's path, checked before any work is done for it: its directory exists and it
/// is not a directory itself (a 600 s run is not lost to a typo in `--out`).
pub(super) fn check_out(out: Option<&std::path::Path>) -> Result<(), String> {
    check_written("--out", out)
}

/// `check_out` for the file flag `flag` names (`simulate --trace`'s error named no flag).
pub(super) fn check_written(flag: &str, out: Option<&std::path::Path>) -> Result<(), String> {
    let Some(path) = out else { return Ok(()) };
    if path.is_dir() {
        return Err(format!("{flag} {}: a directory; name a file to write", path.display()));
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if !dir.is_dir() {
        return Err(format!("{flag} {}: the directory {} does not exist", path.display(), dir.display()));
    }
    Ok(())
}

/// An output path that names a file the command reads, refused before any work: the output
/// would replace its own input (`simulate s.json --trace s.json` left a trace where the
/// schedule was, and `regenerate s.json --out s.json` the only copy of the stored schedule).
pub(super) fn not_an_input(flag: &str, out: Option<&std::path::Path>, inputs: &[Option<&str>]) -> Result<(), String> {
    // An output that is not there yet is no input; nor is a spec. Stdin (`-`) is when it is
    // that file redirected (`simulate - --trace s.json < s.json`).
    let Some(written) = out.filter(|o| o.exists()) else { return Ok(()) };
    for input in inputs.iter().flatten() {
        let same = match *input {
            "-" => stdin_is(written),
            path => same_file(std::path::Path::new(path), written),
        };
        if same {
            let out = out.map_or(String::new(), |o| o.display().to_string());
            let input = if *input == "-" { "on stdin" } else { input };
            return Err(format!(
                "{flag} {out}: the same file as the input {input}, which the output would replace; name another file"
            ));
        }
    }
    Ok(())
}

/// Whether two paths name one file: one device and inode where the platform has them (a hard
/// link is another path to the same file, which canonical paths do not see), else one
/// canonical path.
fn same_file(a: &std::path::Path, b: &std::path::Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        if let (Ok(a), Ok(b)) = (std::fs::metadata(a), std::fs::metadata(b)) {
            return a.dev() == b.dev() && a.ino() == b.ino();
        }
        false
    }
    #[cfg(not(unix))]
    {
        matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
    }
}

/// Whether stdin is the file at `path` (redirected from it; a pipe or a terminal is not).
fn stdin_is(path: &std::path::Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use std::os::unix::fs::MetadataExt;
        let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned() else { return false };
        match (std::fs::File::from(fd).metadata(), std::fs::metadata(path)) {
            (Ok(a), Ok(b)) => a.is_file() && a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        false
    }
}

/// Whether `name` is a file `--format chakra-et` may write with `prefix`: the configuration,
/// the network file (written only where the backend has the topology) and a trace of any rank
/// number, or with `rank` that rank's trace alone. A superset of what it writes: the check
/// before the work errs on the side of the input.
fn chakra_writes(name: &str, prefix: &str, rank: Option<u32>) -> bool {
    let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('.')) else { return false };
    let trace = |r: &str| {
        r.strip_suffix(".et").is_some_and(|n| {
            !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && rank.is_none_or(|k| n == k.to_string())
        })
    };
    match rank {
        Some(_) => trace(rest),
        None => {
            matches!(rest, "system.json" | "memory.json" | "network.yml")
                || trace(rest)
                || rest.strip_prefix("workload.").is_some_and(trace)
        }
    }
}

/// `--out` of a command that writes a file, or with `chakra` (its prefix and rank) the
/// directory of Chakra traces, checked before any work (a synthesis may run for minutes).
pub(super) fn check_written_by(
    chakra: Option<(&str, Option<u32>)>,
    out: Option<&std::path::Path>,
    inputs: &[Option<&str>],
) -> Result<(), String> {
    if chakra.is_none() {
        check_out(out)?;
    }
    not_an_input("--out", out, inputs)?;
    chakra.map_or(Ok(()), |(prefix, rank)| check_chakra_dir(out, prefix, rank, inputs))
}

/// `check_out` and `not_an_input` for the directory `--format chakra-et` writes into, before
/// the schedule is read or synthesized: an `--out` that is a file, and an input in the
/// directory under a name the export would write, are refused (`write_chakra` checks the names
/// it writes again, exactly).
fn check_chakra_dir(
    dir: Option<&std::path::Path>,
    prefix: &str,
    rank: Option<u32>,
    inputs: &[Option<&str>],
) -> Result<(), String> {
    // (Found by the directory's creation, it read "File exists", as if the export would not
    // overwrite.)
    if let Some(file) = dir.filter(|d| d.exists() && !d.is_dir()) {
        let why = "--format chakra-et writes several files into the directory --out names";
        return Err(format!("--out {}: a file, not a directory: {why}", file.display()));
    }
    // A directory still to be made holds no input.
    let Some(dir) = dir.filter(|d| d.is_dir()) else { return Ok(()) };
    for input in inputs.iter().flatten() {
        let name = std::path::Path::new(input).file_name().and_then(|n| n.to_str());
        if let Some(name) = name.filter(|n| chakra_writes(n, prefix, rank)) {
            not_an_input("--out", Some(&dir.join(name)), inputs)?;
        }
    }
    Ok(())
}

/// `--format chakra-et`: writes the traces, workload and configuration files into the
/// directory `out` (created if missing), then prints what ASTRA-sim needs to run them; with
/// `--rank R`, rank R's trace alone. The writer's refusals name `file`, the schedule's (when it
/// came from one); the directory's name `--out`.
pub(super) fn write_chakra(
    s: &Schedule,
    (file, inputs): (Option<&str>, &[Option<&str>]),
    out: Option<&std::path::Path>,
    prefix: &str,
    rank: Option<u32>,
) -> Result<(), CliError> {
    let dir = out.ok_or("--format chakra-et writes several files: name their directory with --out DIR")?;
    let of_file = |e: engine::Error| match (e, file) {
        // The prefix is the flag's, not the schedule's: named as --prefix.
        (engine::Error::Input(e), _) if !e.errors.is_empty() && e.errors.iter().all(|f| f.path == "prefix") => {
            CliError::from(super::input::flags(e))
        }
        (e, Some(f)) => CliError::from(e).context(f),
        (e, None) => CliError::from(e),
    };
    // One rank's trace is built before its directory is made: a refused rank leaves none.
    let one =
        rank.map(|r| engine::export_chakra_rank(s, prefix, r).map(|file| (r, file))).transpose().map_err(of_file)?;
    // So is the whole export's refusal from its counts (an invalid schedule's is later).
    if rank.is_none() {
        engine::chakra_fits(s, s.transfers.len()).map_err(of_file)?;
    }
    // An --out that is a file, or a directory that cannot be made, is named as the flag (it
    // read "ar.json: afile: File exists", as if the schedule were at fault).
    let at_out = |e: std::io::Error| format!("--out {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(at_out)?;
    let abs = std::fs::canonicalize(dir).map_err(at_out)?;
    // A file the command reads may sit in the directory under a name the export writes
    // (`ar.system.json`): refused before any is written, as an `--out` naming an input is.
    let no_input = |name: &str| not_an_input("--out", Some(&abs.join(name)), inputs);
    if let Some((rank, (name, bytes))) = one {
        no_input(&name)?;
        let path = abs.join(name);
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("ccsynth: wrote rank {rank}'s trace to {}", path.display());
        return Ok(());
    }
    let abs_text = abs.to_str().ok_or_else(|| format!("--out {}: not a UTF-8 path", abs.display()))?;
    let export = engine::export_chakra(s, prefix, Some(abs_text)).map_err(of_file)?;
    export.files.iter().try_for_each(|(name, _)| no_input(name))?;
    for (name, bytes) in &export.files {
        let path = abs.join(name);
        std::fs::write(&path, bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    eprintln!("ccsynth: wrote {} files to {}", export.files.len(), abs.display());
    warn_of_older_files(&abs, prefix, &export.files);
    let network = match &export.network {
        Ok(name) => format!("network: {name}"),
        Err(why) => format!("network: none written: {why}"),
    };
    println!(
        "system configuration: {}
{network}
run, in {}: {}",
        export.system_key,
        abs.display(),
        export.command
    );
    Ok(())
}

/// Warns of files of the export's prefix in `dir` that it did not write (an earlier export's
/// `NAME.network.yml`, or traces of ranks this topology lacks): ASTRA-sim, or a launcher that
/// globs the directory, would read them beside these. Not removed: they are the user's.
fn warn_of_older_files(dir: &std::path::Path, prefix: &str, written: &[(String, Vec<u8>)]) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut older: Vec<String> = entries
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('.')))
        .filter(|n| [".et", ".yml", ".json"].iter().any(|ext| n.ends_with(ext)))
        .filter(|n| !written.iter().any(|(w, _)| w == n))
        .collect();
    if older.is_empty() {
        return;
    }
    older.sort();
    let more = older.len().saturating_sub(3);
    let shown = older.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    let more = if more > 0 { format!(" and {more} more") } else { String::new() };
    eprintln!(
        "ccsynth: warning: {} also holds {shown}{more} of prefix {prefix}, which this export did not write (an earlier one's?)",
        dir.display()
    );
}
