//! Where a command writes, checked before any work is done for it: an `--out` whose directory
//! exists, that is no directory, and that is not a file the command reads.

/// An output file's path, checked before any work is done for it: its directory exists and it
/// is not a directory itself (a 600 s run is not lost to a typo in `--out`).
pub(super) fn check_out(out: Option<&std::path::Path>) -> Result<(), String> {
    let Some(path) = out else { return Ok(()) };
    if path.is_dir() {
        return Err(format!("--out {}: a directory; name a file to write", path.display()));
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
    if !dir.is_dir() {
        return Err(format!("--out {}: the directory {} does not exist", path.display(), dir.display()));
    }
    Ok(())
}

/// An output path that names a file the command reads, refused before any work: the output
/// would replace its own input (`simulate s.json --trace s.json` left a trace where the
/// schedule was, and `regenerate s.json --out s.json` the only copy of the stored schedule).
pub(super) fn not_an_input(flag: &str, out: Option<&std::path::Path>, inputs: &[Option<&str>]) -> Result<(), String> {
    // An output that is not there yet is no input; nor is stdin (`-`) or a spec.
    let Some(written) = out.and_then(|o| o.canonicalize().ok()) else { return Ok(()) };
    for input in inputs.iter().flatten().filter(|i| **i != "-") {
        if std::path::Path::new(input).canonicalize().is_ok_and(|read| read == written) {
            let out = out.map_or(String::new(), |o| o.display().to_string());
            return Err(format!(
                "{flag} {out}: the same file as the input {input}, which the output would replace; name another file"
            ));
        }
    }
    Ok(())
}
