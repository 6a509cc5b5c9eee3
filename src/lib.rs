//! ccsynth library root: topology and collective models, the schedule interchange format,
//! the validator, the α-β simulator and lower bounds, the synthesizers and baselines (the
//! pure core, no I/O), then the edges: `api` (HTTP), `store` (database) and `cli`.

pub mod api;
pub mod baselines;
pub mod bench;
pub mod bounds;
pub mod collective;
pub mod engine;
pub mod error;
pub mod export;
pub mod limits;
pub mod maxflow;
pub mod mcf;
pub mod rng;
pub mod runs;
pub mod schedule;
pub mod sim;
pub mod slots;
pub mod spans;
pub mod store;
pub mod strict;
pub mod synth;
pub mod ten;
pub mod topology;
pub mod units;
pub mod validate;

pub mod cli;

pub use collective::{Collective, CollectiveKind, CollectiveSpec};
pub use error::{FieldError, InputError};
pub use schedule::{Op, Schedule, Transfer};
pub use topology::{Link, Topology};
