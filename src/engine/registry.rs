//! The algorithm registry: every algorithm the engine runs (the synthesizers and the
//! hand-built baselines), what each serves and which options it reads. Doors list and check
//! algorithms here only; adding an algorithm is an entry here and an arm in `engine::run`.

use crate::collective::CollectiveKind;
use crate::error::InputError;
use serde::Serialize;

pub use crate::baselines::BaselineInfo;

/// An algorithm the engine can run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Algorithm {
    /// The portfolio: the synthesizers and every applicable baseline of `compare`'s default
    /// set within the time limit; the fastest validated schedule wins (`engine::portfolio`).
    Auto,
    /// The randomized greedy matcher on the time-expanded network.
    Greedy,
    /// The integer program on the time-expanded network (HiGHS).
    Ilp,
    /// A hand-built algorithm, by its registry name (`ring`, `swing-bandwidth`, `kolmakov-r2`).
    Baseline(String),
}

impl Algorithm {
    /// The algorithm of that name (baseline variants such as `kolmakov-r2` included).
    pub fn parse(name: &str) -> Option<Algorithm> {
        match name {
            PORTFOLIO => Some(Algorithm::Auto),
            "greedy" => Some(Algorithm::Greedy),
            "ilp" => Some(Algorithm::Ilp),
            b if crate::baselines::is_known(b) => Some(Algorithm::Baseline(b.to_string())),
            _ => None,
        }
    }

    /// Its name as requests and schedules spell it.
    pub fn name(&self) -> &str {
        match self {
            Algorithm::Auto => PORTFOLIO,
            Algorithm::Greedy => "greedy",
            Algorithm::Ilp => "ilp",
            Algorithm::Baseline(b) => b,
        }
    }

    /// Whether it synthesizes (rather than builds a fixed pattern): the portfolio counts, as
    /// it serves several collectives at once through its synthesizers.
    pub fn is_synthesizer(&self) -> bool {
        !matches!(self, Algorithm::Baseline(_))
    }

    /// Why `name` is no algorithm, in the words every door uses (the field is `algorithm`).
    fn unknown(name: &str) -> String {
        format!("{name:?}: expected one of {}", names().join(", "))
    }
}

/// The parser of every door: the CLI's `--algo`, the API's `algorithm` (through serde) and
/// the library's callers; an unknown name is refused naming the field `algorithm`.
impl std::str::FromStr for Algorithm {
    type Err = InputError;

    fn from_str(name: &str) -> Result<Algorithm, InputError> {
        Algorithm::parse(name).ok_or_else(|| InputError::new("algorithm", Algorithm::unknown(name)))
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// As requests and schedules spell it: its name.
impl Serialize for Algorithm {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Algorithm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Algorithm, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Algorithm::parse(&name).ok_or_else(|| serde::de::Error::custom(Algorithm::unknown(&name)))
    }
}

/// The synthesizers the engine offers.
pub const SYNTHESIZERS: &[&str] = &["greedy", "ilp"];

/// The portfolio's name, the default algorithm of `synth` and of the API.
pub const PORTFOLIO: &str = "auto";

/// A synthesizer as `/v1/algorithms` lists it.
#[derive(Clone, Debug, Serialize)]
pub struct SynthesizerInfo {
    /// Its name in requests.
    pub name: &'static str,
    /// `synthesizer`, or `portfolio` for `auto`.
    pub kind: &'static str,
    /// The collectives it serves.
    pub collectives: Vec<CollectiveKind>,
    /// The `options` fields it reads.
    pub options: &'static [&'static str],
}

/// Every algorithm, as `GET /v1/algorithms` answers.
#[derive(Clone, Debug, Serialize)]
pub struct Listing {
    /// The synthesizers.
    pub synthesizers: Vec<SynthesizerInfo>,
    /// The hand-built algorithms.
    pub baselines: Vec<BaselineInfo>,
}

/// The whole registry.
pub fn listing() -> Listing {
    let all: Vec<CollectiveKind> =
        CollectiveKind::ALL.iter().copied().filter(|k| *k != CollectiveKind::Custom).collect();
    Listing {
        synthesizers: vec![
            SynthesizerInfo {
                name: PORTFOLIO,
                kind: "portfolio",
                collectives: all.clone(),
                options: &[
                    "seed",
                    "seeds",
                    "threads",
                    "chunks_per_npu",
                    "time_limit_s",
                    "solve_time_limit_s",
                    "switch_model",
                    "discretization",
                    "ignore_congestion",
                    "window",
                ],
            },
            SynthesizerInfo {
                name: "greedy",
                kind: "synthesizer",
                collectives: all.clone(),
                options: &[
                    "seed",
                    "seeds",
                    "threads",
                    "chunks_per_npu",
                    "time_limit_s",
                    "switch_model",
                    "discretization",
                ],
            },
            SynthesizerInfo {
                name: "ilp",
                kind: "synthesizer",
                collectives: all,
                options: &[
                    "seed",
                    "threads",
                    "chunks_per_npu",
                    "time_limit_s",
                    "solve_time_limit_s",
                    "switch_model",
                    "discretization",
                    "ignore_congestion",
                    "window",
                ],
            },
        ],
        baselines: baselines(),
    }
}

/// Every baseline with what it supports (`ccsynth baseline --list`).
pub fn baselines() -> Vec<BaselineInfo> {
    crate::baselines::list()
}

/// The baselines `compare` runs by default.
pub fn baseline_names() -> Vec<&'static str> {
    crate::baselines::names()
}

/// Every algorithm name: the portfolio, the synthesizers, then the baselines (variants by
/// their pattern).
pub fn names() -> Vec<&'static str> {
    let mut v = vec![PORTFOLIO];
    v.extend(SYNTHESIZERS);
    v.extend(baseline_names());
    v.push(crate::baselines::KOLMAKOV_VARIANTS);
    v
}

/// Whether the named baseline serves `kind` (false for unknown names).
pub fn baseline_supports(name: &str, kind: CollectiveKind) -> bool {
    crate::baselines::info(name).is_some_and(|b| b.collectives.contains(&kind))
}

/// Checks a list of baseline names (`compare --algos`); the error names `field`.
pub fn check_baselines<'a>(field: &str, list: &'a [String]) -> Result<Vec<&'a str>, InputError> {
    match list.iter().find(|a| !crate::baselines::is_known(a.trim())) {
        Some(a) => Err(InputError::new(
            field,
            format!(
                "unknown baseline {a:?}; expected some of {}, {}",
                baseline_names().join(", "),
                crate::baselines::KOLMAKOV_VARIANTS
            ),
        )),
        None => Ok(list.iter().map(|a| a.trim()).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The options `/v1/algorithms` says each synthesizer reads are fields of the request's
    /// options (as serde names them), and `auto`, which passes its options on to the
    /// greedy and the ILP, reads every one that either reads.
    #[test]
    fn the_listed_options_are_the_requests_options() {
        let e = serde_json::from_value::<super::super::Options>(serde_json::json!({"__x": 1})).unwrap_err();
        let e = e.to_string();
        let fields: Vec<&str> =
            e.split("expected one of ").nth(1).unwrap().split(", ").map(|f| f.trim_matches('`')).collect();
        let listing = listing();
        for s in &listing.synthesizers {
            for o in s.options {
                assert!(fields.contains(o), "{}: {o} is not an option ({fields:?})", s.name);
            }
        }
        let auto = &listing.synthesizers[0];
        assert_eq!(auto.name, PORTFOLIO);
        for s in &listing.synthesizers[1..] {
            for o in s.options {
                assert!(auto.options.contains(o), "auto does not list {o}, which {} reads", s.name);
            }
        }
        // Every option is read by some synthesizer.
        for f in &fields {
            assert!(auto.options.contains(f), "no synthesizer lists {f}");
        }
    }

    /// Every door reads an algorithm with the same parser: each name round-trips through
    /// `FromStr`, `Display` and serde, and an unknown one is refused in the same words by
    /// `FromStr` (naming the field `algorithm`) and by serde.
    #[test]
    fn an_algorithm_reads_the_same_at_every_door() {
        for name in names().into_iter().filter(|n| !n.contains('<')).chain(["kolmakov-r2"]) {
            let a: Algorithm = name.parse().unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(a.to_string(), name);
            assert_eq!(serde_json::to_value(&a).unwrap(), serde_json::json!(name));
            assert_eq!(serde_json::from_value::<Algorithm>(serde_json::json!(name)).unwrap(), a);
        }
        let e = "fastest".parse::<Algorithm>().unwrap_err();
        assert_eq!(e.errors[0].path, "algorithm");
        assert!(e.errors[0].message.starts_with("\"fastest\": expected one of auto, greedy, ilp, "), "{e}");
        let de = serde_json::from_value::<Algorithm>(serde_json::json!("fastest")).unwrap_err();
        assert_eq!(de.to_string(), e.errors[0].message);
        assert!(serde_json::from_value::<Algorithm>(serde_json::json!(3)).is_err());
    }
}
